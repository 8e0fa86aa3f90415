"""Second half of 0003, in its own transaction (PostgreSQL refuses ALTER TABLE with the data
step's trigger events pending)."""

import django.db.models.deletion
from django.db import migrations, models

KINDS = [
    ("stopped_active", "activity on a stopped allocation"),
    ("unallocated_active", "activity on an unallocated GPU"),
    ("xid", "XID error"),
    ("hot", "temperature over threshold"),
    ("gpu_missing", "GPU missing from the exporter"),
    ("node_unreachable", "node cannot be polled"),
]
SEVERITIES = [("info", "info"), ("warning", "warning"), ("critical", "critical")]


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0003_flags_energy_fleet")]

    operations = [
        migrations.AlterField(
            "flag",
            "node",
            models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="flags",
                to="catalog.node",
            ),
        ),
        migrations.AlterField(
            "flag",
            "gpu",
            models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="flags",
                to="catalog.gpu",
            ),
        ),
        migrations.AlterField("flag", "kind", models.CharField(choices=KINDS, max_length=20)),
        migrations.AlterField(
            "flag", "severity", models.CharField(choices=SEVERITIES, max_length=10)
        ),
        migrations.AlterField("flag", "last_seen_at", models.DateTimeField()),
        migrations.AddConstraint(
            "flag",
            models.UniqueConstraint(
                condition=models.Q(closed_at__isnull=True),
                fields=("node", "gpu", "kind"),
                name="telemetry_flag_one_open",
                nulls_distinct=False,
            ),
        ),
        migrations.AddConstraint(
            "flag",
            models.CheckConstraint(
                condition=models.Q(kind__in=[k for k, _ in KINDS]),
                name="telemetry_flag_kind_valid",
            ),
        ),
        migrations.AddConstraint(
            "flag",
            models.CheckConstraint(
                condition=models.Q(severity__in=[s for s, _ in SEVERITIES]),
                name="telemetry_flag_severity_valid",
            ),
        ),
        migrations.AddConstraint(
            "flag",
            models.CheckConstraint(
                condition=models.Q(last_seen_at__gte=models.F("opened_at")),
                name="telemetry_flag_seen_after_opened",
            ),
        ),
        migrations.AddIndex(
            "flag",
            models.Index(
                condition=models.Q(closed_at__isnull=True),
                fields=["-opened_at"],
                name="telemetry_flag_open",
            ),
        ),
    ]
