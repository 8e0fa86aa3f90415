from django.core.management.base import BaseCommand

from rentals.services.edges import holding_edges_from_minutes
from telemetry.services import former_rollups_truncate


class Command(BaseCommand):
    help = (
        "Convert the former per-GPU minute rollups: keep every holding's partial first and last"
        " hour (from raw samples where kept, else from the minute rows), then, with --truncate,"
        " empty the former rollups' table. Resumable: run it again after a stop."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="holdings per batch")
        parser.add_argument(
            "--truncate", action="store_true",
            help="empty the former rollups' table once every edge is kept",
        )  # fmt: skip

    def handle(self, *args, batch, truncate, **options):
        counts = holding_edges_from_minutes(batch=batch, log=self.stdout.write)
        self.stdout.write(
            f"edges kept: {counts['from_raw']} from raw samples,"
            f" {counts['from_minutes']} from minute rows"
        )
        if truncate:
            former_rollups_truncate()
            self.stdout.write("former per-GPU rollups emptied")
