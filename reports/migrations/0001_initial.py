"""The fleet report's closed steps, made by rentals 0033 (`rentals_allocatedstep`,
`rentals_ledgerday`): taken over as they are, in the migrations' state only. No table, index,
constraint or row is touched, and the tables keep rentals' names. Rentals 0038 gives them up
in its state first.
"""

import django.db.models.deletion
from django.db import migrations, models

import core.money


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("catalog", "0010_catalog_words_in_each_language"),
        ("rentals", "0038_reports_moved_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="AllocatedStep",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "bucket",
                            models.CharField(
                                choices=[("hour", "Hour"), ("day", "Day")], max_length=4
                            ),
                        ),
                        ("at", models.DateTimeField(help_text="the step's start")),
                        ("gpus", models.PositiveIntegerField()),
                    ],
                    options={
                        "db_table": "rentals_allocatedstep",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("bucket", "at"), name="rentals_allocatedstep_once"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("bucket__in", ["hour", "day"])),
                                name="rentals_allocatedstep_bucket_valid",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="LedgerDay",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("at", models.DateTimeField(help_text="the day's start")),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("charge", "charge"),
                                    ("refund", "refund"),
                                    ("credit", "credit"),
                                ],
                                max_length=10,
                            ),
                        ),
                        ("currency", core.money.CurrencyField(max_length=3)),
                        ("net", core.money.MoneyField(decimal_places=4, max_digits=18)),
                        ("entries", models.PositiveIntegerField()),
                        (
                            "period",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="catalog.rentalperiod",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "rentals_ledgerday",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("at", "kind", "currency", "period"),
                                name="rentals_ledgerday_once",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("kind__in", ["charge", "refund", "credit"])),
                                name="rentals_ledgerday_kind_valid",
                            ),
                        ],
                    },
                ),
            ],
        )
    ]
