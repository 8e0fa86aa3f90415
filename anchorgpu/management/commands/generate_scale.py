"""`manage.py generate_scale --gpus N --days D`: a provider's year at scale (anchorgpu/scale.py)."""

from django.core.management.base import BaseCommand, CommandError

from anchorgpu.scale import generate_scale


class Command(BaseCommand):
    help = "Generate a fleet of N GPUs with D days of business (deterministic, binary COPY)."

    def add_arguments(self, parser):
        parser.add_argument("--gpus", type=int, required=True)
        parser.add_argument("--days", type=int, default=365)
        parser.add_argument("--seed", type=int, default=32)
        parser.add_argument(
            "--hourly-days", type=int, default=7,
            help="days of per-GPU hourly rollups (the rest of the year: daily and fleet rollups)",
        )  # fmt: skip
        parser.add_argument("--raw-hours", type=float, default=1.0, help="hours of raw samples")
        parser.add_argument(
            "--unrolled", action="store_true",
            help="leave the raw samples for the next rollup (default: the rollup runs once, "
            "as beat runs it every minute)",
        )  # fmt: skip
        parser.add_argument(
            "--reset", action="store_true",
            help="empty the fleet, teams, rentals and telemetry first (a fresh database needs none)",
        )  # fmt: skip

    def handle(self, *args, gpus, days, seed, hourly_days, raw_hours, reset, unrolled, **options):
        if gpus < 1 or days < 1:
            raise CommandError("--gpus and --days must be at least 1.")
        result = generate_scale(
            gpus=gpus, days=days, seed=seed, hourly_days=hourly_days, raw_hours=raw_hours,
            reset=reset, minutes_rolled=not unrolled, log=self.stdout.write,
        )  # fmt: skip
        total = sum(result["timings"].values())
        self.stdout.write(f"generated {gpus} GPUs × {days} days in {total:.0f} s")
        for table, rows in result["rows"].items():
            self.stdout.write(f"  {table}: {rows}")
