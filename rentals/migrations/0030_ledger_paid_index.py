# What each allocation paid, read by the allocation list 50 at a time, comes from an index
# on (allocation) that carries the amounts, not from every ledger row of each allocation.
# The plain indexes on allocation and team go: this one and `rentals_ledger_team_at_id` lead
# with them. They are dropped by name: Django's AlterField would also drop the partial
# unique index `rentals_ledgerentry_one_refund` on the same column and re-add both foreign
# keys, validating the whole ledger again.

import django.db.models.deletion
from django.db import migrations, models

PLAIN_INDEXES = {
    "allocation": "rentals_ledgerentry_allocation_id_8d9c4a6f",
    "team": "rentals_ledgerentry_team_id_afd8dd8b",
}


def _unindexed(name, to, related_name):
    field = models.ForeignKey(
        db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name=related_name,
        to=to,
    )  # fmt: skip
    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AlterField("ledgerentry", name, field)],
        database_operations=[
            migrations.RunSQL(
                f'DROP INDEX "{PLAIN_INDEXES[name]}"',
                f'CREATE INDEX "{PLAIN_INDEXES[name]}" ON rentals_ledgerentry ({name}_id)',
            )
        ],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0012_team_buyer"),
        ("rentals", "0029_event_stop_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="ledgerentry",
            index=models.Index(
                fields=["allocation"],
                include=("kind", "currency", "amount"),
                name="rentals_ledger_allocation_paid",
            ),
        ),
        _unindexed("allocation", "rentals.allocation", "ledger"),
        _unindexed("team", "accounts.team", "+"),
    ]
