"""Second half of 0012: the facts are filled in, so they become required and the sentences
go (a separate migration: PostgreSQL refuses ALTER TABLE with the data step's trigger events
pending in the same transaction)."""

import django.db.models.functions.comparison
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("rentals", "0012_facts_not_sentences")]

    operations = [
        migrations.AlterField(
            "quoteline",
            "count",
            models.PositiveIntegerField(help_text="GPUs, or units of the option"),
        ),
        migrations.AlterField(
            "ledgerentry",
            "reason",
            models.CharField(
                max_length=12,
                choices=[
                    ("booking", "booking"),
                    ("extension", "extension"),
                    ("cancellation", "cancellation"),
                ],
            ),
        ),
        migrations.RemoveField("quoteline", "description"),
        migrations.RemoveField("ledgerentry", "description"),
        migrations.AddConstraint(
            "quoteline",
            models.CheckConstraint(
                condition=models.Q(
                    quantity=models.F("count")
                    * django.db.models.functions.comparison.Coalesce(models.F("periods"), 1)
                ),
                name="rentals_quoteline_quantity_is_count_times_periods",
            ),
        ),
        migrations.AddConstraint(
            "quoteline",
            models.CheckConstraint(
                condition=models.Q(kind="gpu", option__isnull=True, periods__isnull=False)
                | models.Q(kind="option", option__isnull=False),
                name="rentals_quoteline_facts_match_kind",
            ),
        ),
        migrations.AddConstraint(
            "ledgerentry",
            models.CheckConstraint(
                condition=models.Q(reason__in=["booking", "extension", "cancellation"]),
                name="rentals_ledgerentry_reason_valid",
            ),
        ),
        migrations.AddConstraint(
            "ledgerentry",
            models.CheckConstraint(
                condition=models.Q(
                    kind="charge", reason__in=["booking", "extension"], period_count__gte=1
                )
                | models.Q(kind="refund", reason="cancellation"),
                name="rentals_ledgerentry_reason_matches_kind",
            ),
        ),
        migrations.AddConstraint(
            "ledgerentry",
            models.CheckConstraint(
                condition=models.Q(currency__regex="^[A-Z]{3}$"),
                name="rentals_ledgerentry_currency_is_a_code",
            ),
        ),
    ]
