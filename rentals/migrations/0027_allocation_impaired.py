# The allocations marked impaired are a handful of the year's: the impairment sweep and
# /metrics read them, and scanned every allocation to find them (436,514 at 100k GPUs,
# 61 ms a scrape). Built concurrently: bookings write the table.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("rentals", "0026_ledger_period"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="allocation",
            index=models.Index(
                condition=models.Q(("impaired_since__isnull", False)),
                fields=["impaired_since"],
                name="rentals_allocation_impaired",
            ),
        ),
    ]
