from django.core.management.base import BaseCommand

from invoices.services import invoices_issue_missing


class Command(BaseCommand):
    help = "Issue invoices and credit notes for ledger rows that have none (the demo's history)."

    def handle(self, *args, **options):
        self.stdout.write(f"{invoices_issue_missing()} documents issued")
