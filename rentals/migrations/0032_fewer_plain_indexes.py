# A booking wrote plain indexes on foreign keys that a unique pair or a composite index
# already leads with; they go, so each holding writes two index entries fewer and each
# booking five. Dropped by name as in rentals 0030 (Django's AlterField would re-add the
# foreign keys and validate every row again). A window's (maintenance, gpu) pair becomes
# partial: an allocation's holding has no window, and each one added an entry under NULL
# that no uniqueness or look-up ever read.

import django.db.models.deletion
from django.db import migrations, models

CASCADE, PROTECT = django.db.models.deletion.CASCADE, django.db.models.deletion.PROTECT

# (model, field, its foreign key without a plain index, the index dropped), each led by
# the index named after it.
UNINDEXED = [
    ("allocationgpu", "allocation", "rentals.allocation", CASCADE, "held", True,
     "rentals_allocationgpu_allocation_id_793859f5"),  # rentals_allocationgpu_once
    ("allocationgpu", "maintenance", "rentals.maintenancewindow", CASCADE, "held", True,
     "rentals_allocationgpu_maintenance_id_ef50d594"),  # ..._once_per_window
    ("allocation", "team", "accounts.team", PROTECT, "+", False,
     "rentals_allocation_team_id_79d9310f"),  # rentals_allocation_team_from
    ("allocation", "quote", "rentals.quote", PROTECT, "allocations", False,
     "rentals_allocation_quote_id_66f623b1"),  # rentals_allocation_one_per_quote_node
    ("allocationkey", "allocation", "rentals.allocation", CASCADE, "keys", False,
     "rentals_allocationkey_allocation_id_1eb705f1"),  # rentals_allocationkey_once
    ("idempotencykey", "team", "accounts.team", CASCADE, "+", False,
     "rentals_idempotencykey_team_id_ed88ea20"),  # rentals_idempotencykey_once
    ("quoteline", "quote", "rentals.quote", CASCADE, "lines", False,
     "rentals_quoteline_quote_id_1876a814"),  # rentals_quoteline_position
]  # fmt: skip


def _unindexed(model, name, to, on_delete, related_name, optional, index):
    field = models.ForeignKey(
        db_index=False, on_delete=on_delete, related_name=related_name, to=to,
        null=optional, blank=optional,
    )  # fmt: skip
    return migrations.SeparateDatabaseAndState(
        state_operations=[migrations.AlterField(model, name, field)],
        database_operations=[
            migrations.RunSQL(
                f'DROP INDEX "{index}"',
                f'CREATE INDEX "{index}" ON rentals_{model} ({name}_id)',
            )
        ],
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0012_team_buyer"),
        ("rentals", "0031_holding_node_live_index"),
    ]

    operations = [
        *(_unindexed(*unindexed) for unindexed in UNINDEXED),
        migrations.RemoveConstraint(
            model_name="allocationgpu", name="rentals_allocationgpu_once_per_window"
        ),
        migrations.AddConstraint(
            model_name="allocationgpu",
            constraint=models.UniqueConstraint(
                condition=models.Q(maintenance__isnull=False),
                fields=("maintenance", "gpu"),
                name="rentals_allocationgpu_once_per_window",
            ),
        ),
    ]
