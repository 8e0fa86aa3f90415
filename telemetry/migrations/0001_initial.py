"""Telemetry's models, created by rentals 0001 before telemetry was its own app.

This takes them over as they are (state only: no table or row is touched); 0002 renames
the tables and their indexes to telemetry's names. It depends on rentals 0003 only because
that is where the tables were made; it reads nothing of rentals.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("catalog", "0002_node_telemetry_url_internal_hosts"),
        ("rentals", "0003_rollup_day_bucket"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Flag",
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
                            "kind",
                            models.CharField(
                                choices=[
                                    ("stopped_active", "activity on a stopped allocation"),
                                    ("unallocated_active", "activity on an unallocated GPU"),
                                    ("xid", "XID error"),
                                    ("hot", "temperature over threshold"),
                                    ("gpu_missing", "GPU missing from the exporter"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("detail", models.CharField(blank=True, max_length=200)),
                        ("opened_at", models.DateTimeField()),
                        ("closed_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "gpu",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="flags",
                                to="catalog.gpu",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "rentals_flag",
                        "ordering": ["-opened_at"],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("closed_at__isnull", True)),
                                fields=("gpu", "kind"),
                                name="rentals_flag_one_open",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="GpuRollup",
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
                                choices=[("minute", "Minute"), ("hour", "Hour"), ("day", "Day")],
                                max_length=6,
                            ),
                        ),
                        ("at", models.DateTimeField()),
                        ("samples", models.PositiveIntegerField()),
                        ("utilization_avg", models.FloatField(null=True)),
                        ("utilization_max", models.FloatField(null=True)),
                        ("memory_used_max_mib", models.FloatField(null=True)),
                        ("memory_total_mib", models.FloatField(null=True)),
                        ("power_avg_w", models.FloatField(null=True)),
                        ("temperature_max_c", models.FloatField(null=True)),
                        ("energy_j", models.FloatField(null=True)),
                        (
                            "gpu",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="catalog.gpu",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "rentals_gpurollup",
                        "indexes": [
                            models.Index(fields=["bucket", "at"], name="rentals_rollup_bucket_at")
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("gpu", "bucket", "at"), name="rentals_gpurollup_once"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="GpuSample",
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
                        ("at", models.DateTimeField()),
                        ("utilization", models.FloatField(null=True)),
                        ("memory_used_mib", models.FloatField(null=True)),
                        ("memory_total_mib", models.FloatField(null=True)),
                        ("power_w", models.FloatField(null=True)),
                        ("temperature_c", models.FloatField(null=True)),
                        ("energy_j", models.FloatField(null=True)),
                        ("xid", models.IntegerField(null=True)),
                        (
                            "gpu",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="catalog.gpu",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "rentals_gpusample",
                        "indexes": [
                            models.Index(fields=["gpu", "at"], name="rentals_sample_gpu_at"),
                            models.Index(fields=["at"], name="rentals_sample_at"),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Poll",
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
                        ("at", models.DateTimeField()),
                        ("duration_ms", models.PositiveIntegerField()),
                        (
                            "outcome",
                            models.CharField(
                                choices=[
                                    ("ok", "ok"),
                                    ("degraded", "degraded"),
                                    ("unreachable", "unreachable"),
                                    ("malformed", "malformed"),
                                ],
                                max_length=12,
                            ),
                        ),
                        ("error", models.TextField(blank=True)),
                        ("gpus_seen", models.PositiveSmallIntegerField(default=0)),
                        (
                            "node",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="polls",
                                to="catalog.node",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "rentals_poll",
                        "indexes": [
                            models.Index(
                                fields=["node", "-at"], name="rentals_pol_node_id_07ce20_idx"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
