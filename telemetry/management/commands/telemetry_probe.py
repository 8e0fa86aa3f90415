import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from telemetry.parse import ScrapeError, parse_exporter
from telemetry.poll import fetch_all, run_async


class Command(BaseCommand):
    help = "Scrape one exporter and print the normalised per-GPU values and every problem found."

    def add_arguments(self, parser):
        parser.add_argument("url")
        parser.add_argument("--exporter", choices=["dcgm", "amd"], default="dcgm")
        parser.add_argument("--prefix", default="", help="AMD metric prefix, e.g. amd_")

    def handle(self, *args, url, exporter, prefix, **options):
        fetched = run_async(fetch_all([(0, url)]))[0]
        report = {"url": url, "exporter": exporter, "duration_ms": fetched.duration_ms}
        problems = []
        gpus = []
        if fetched.error:
            problems.append(f"fetch failed: {fetched.error}")
        else:
            try:
                scrape = parse_exporter(fetched.body, exporter=exporter, prefix=prefix)
            except ScrapeError as exc:
                problems.append(str(exc))
            else:
                problems.extend(scrape.problems)
                if scrape.gpu_families == 0:
                    problems.append("no GPU metric families in the body (exporter degraded?)")
                for reading in scrape.readings.values():
                    row = {k: v for k, v in asdict(reading).items() if not k.startswith("_")}
                    missing = [k for k, v in row.items() if v is None]
                    if missing:
                        problems.append(f"{reading.key}: not reported: {', '.join(missing)}")
                    gpus.append(row)
        report["gpus"] = sorted(gpus, key=lambda r: (r["index"] is None, r["index"], r["key"]))
        report["problems"] = problems
        self.stdout.write(json.dumps(report, indent=2))
        if not gpus:
            raise CommandError("the scrape is unusable: no GPU readings")
