"""What `make run` does before it starts its processes, in one Django process: each step
was a `manage.py` process of its own, and each paid Django's start (about 2 s of CPU) again."""

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Migrate, collect the static files, and load the demo (catalog and fleet; in demo "
        "mode the accounts, rentals, exchange rates, invoices and payments)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--simulator", help="base URL of simulate_nodes, e.g. http://127.0.0.1:9400"
        )

    def handle(self, *args, simulator=None, **options):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("seed_demo", simulator=simulator)
        call_command("exchange_rates_demo")  # the demo's currencies have their PLN rates
        call_command("invoices_issue_missing")  # the demo's history gets its invoices too
        call_command("seed_payments")  # alice pays by card (4242 saved), bob is invoiced
