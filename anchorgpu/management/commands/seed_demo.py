import os

import pghistory
from django.conf import settings
from django.core.management.base import BaseCommand

from catalog.demo import seed_catalog, seed_users
from rentals.demo import seed_demo_keys, seed_rentals
from rentals.simulation import nodes_root
from reports.demo import seed_history


class Command(BaseCommand):
    help = "Load the demo catalog and fleet; in demo mode also the demo accounts and rentals."

    def add_arguments(self, parser):
        parser.add_argument(
            "--simulator", help="base URL of simulate_nodes, e.g. http://127.0.0.1:9400"
        )

    def handle(self, *args, simulator=None, **options):
        # The audit log names what the seeding wrote (prices, accounts, keys, bookings,
        # expiries) as the system's, as it names a Celery task's.
        with pghistory.context(actor="system", task="seed_demo"):
            self._seed(simulator)

    def _seed(self, simulator):
        seed_catalog(simulator_url=simulator)
        if settings.ANCHORGPU["DEMO"]:
            seed_users(password=os.environ.get("DEMO_PASSWORD") or "anchorgpu-demo")
            keys = seed_demo_keys(nodes_root().parent / "demo-keys")
            seed_rentals()
            if seed_history():
                self.stdout.write("30 days of demo history backfilled")
            self.stdout.write("demo catalog, fleet, accounts and rentals ready")
            self.stdout.write("demo SSH keys (private halves): " + ", ".join(str(k) for k in keys))
        else:
            self.stdout.write("demo catalog and fleet ready (no accounts: ANCHORGPU_DEMO is off)")
