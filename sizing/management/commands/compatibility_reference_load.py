"""Load the compatibility reference shipped with this release; staff's rows are kept."""

from django.core.management.base import BaseCommand
from django.db import transaction

from sizing.compat_reference import reference_load
from sizing.models import CudaToolkit, FrameworkBuild, RocmRelease


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args, **options):
        with transaction.atomic():
            counts = reference_load(toolkits=CudaToolkit, builds=FrameworkBuild, rocm=RocmRelease)
        self.stdout.write(
            "{added} rows added, {updated} updated, {kept} of staff's kept".format(**counts)
        )
