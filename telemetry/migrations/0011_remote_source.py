# The operator's engine as a telemetry source (issue 30): a flag on the source itself (no
# node), per-node ingest marks, and the rewritten-samples marks the rollup reads.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0009_node_ssh_details"),
        ("telemetry", "0010_flag_code_and_ras"),
    ]

    operations = [
        migrations.AlterField(
            model_name="flag",
            name="node",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="flags",
                to="catalog.node",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="flag",
            name="telemetry_flag_kind_valid",
        ),
        migrations.AlterField(
            model_name="flag",
            name="kind",
            field=models.CharField(
                choices=[
                    ("stopped_active", "activity on a stopped allocation"),
                    ("unallocated_active", "activity on an unallocated GPU"),
                    ("xid", "XID error"),
                    ("hot", "temperature over threshold"),
                    ("gpu_missing", "GPU missing from the exporter"),
                    ("node_unreachable", "node cannot be polled"),
                    ("agent_silent", "node agent not heard from"),
                    ("engine_unreachable", "telemetry engine cannot be read"),
                    ("ras", "uncorrectable memory error (RAS)"),
                ],
                max_length=20,
            ),
        ),
        migrations.AddConstraint(
            model_name="flag",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "kind__in",
                        [
                            "stopped_active",
                            "unallocated_active",
                            "xid",
                            "hot",
                            "gpu_missing",
                            "node_unreachable",
                            "agent_silent",
                            "engine_unreachable",
                            "ras",
                        ],
                    )
                ),
                name="telemetry_flag_kind_valid",
            ),
        ),
        migrations.CreateModel(
            name="IngestMark",
            fields=[
                (
                    "node",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="catalog.node",
                    ),
                ),
                ("ingested_until", models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name="SamplesRewritten",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField()),
            ],
        ),
    ]
