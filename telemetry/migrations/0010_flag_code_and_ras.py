"""Telemetry flags keep an XID's code; AMD's uncorrectable memory errors (RAS) are a flag."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0009_node_ssh_details"),
        ("telemetry", "0009_node_agents"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="flag",
            name="telemetry_flag_kind_valid",
        ),
        migrations.AddField(
            model_name="flag",
            name="code",
            field=models.IntegerField(blank=True, null=True),
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
                            "ras",
                        ],
                    )
                ),
                name="telemetry_flag_kind_valid",
            ),
        ),
    ]
