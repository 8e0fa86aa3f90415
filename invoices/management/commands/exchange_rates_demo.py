from django.core.management.base import BaseCommand

from invoices.services import exchange_rates_demo_keep


class Command(BaseCommand):
    help = "The demo only: made-up PLN exchange rates for the catalog's currencies (40 days)."

    def handle(self, *args, **options):
        self.stdout.write(f"{exchange_rates_demo_keep()} demo exchange rates added")
