# One node's live holdings from an instant on, for ROOM_EXISTS's node-by-node read.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0010_catalog_words_in_each_language"),
        ("rentals", "0030_ledger_paid_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="allocationgpu",
            index=models.Index(
                condition=models.Q(("released", False)),
                fields=["node", "ends_at"],
                include=("gpu", "starts_at"),
                name="rentals_ag_node_live",
            ),
        ),
    ]
