"""manage.py statement_import FILE…: import camt.053 or MT940 bank statements."""

from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from payments.statements import statement_import


class Command(BaseCommand):
    help = "Import camt.053 or MT940 bank statements: match credits to invoices, queue the rest."

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+")

    def handle(self, *args, files, **options):
        for name in files:
            with open(name, "rb") as handle:
                content = handle.read()
            try:
                result = statement_import(content=content, filename=name)
            except DomainError as exc:
                raise CommandError(f"{name}: {exc.detail}") from exc
            self.stdout.write(
                f"{name}: {result['imported']} imported, {result['matched']} matched, "
                f"{result['unmatched']} unmatched, {result['duplicates']} duplicates"
            )
