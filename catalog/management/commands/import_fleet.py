from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.services import fleet_import
from core.errors import Invalid


class Command(BaseCommand):
    help = "Add or update nodes and their GPUs from a CSV file (all rows or none)."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)

    def handle(self, *args, file, **options):
        try:
            result = fleet_import(text=file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}") from exc
        except Invalid as exc:
            raise CommandError("\n".join(exc.messages)) from exc
        self.stdout.write(
            f"{result['created']} nodes created, {result['updated']} updated, {result['gpus']} GPUs"
        )
