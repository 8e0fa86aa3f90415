"""Flags on nodes or GPUs with severity, first/last seen and acknowledgement; rollups keep
covered and busy seconds; the fleet's size per polling round."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

SEVERITY = {
    "stopped_active": "warning",
    "unallocated_active": "warning",
    "xid": "critical",
    "hot": "warning",
    "gpu_missing": "critical",
    "node_unreachable": "critical",
}


def flags_facts(apps, schema_editor):
    Flag = apps.get_model("telemetry", "Flag")
    for flag in Flag.objects.select_related("gpu"):
        flag.node_id = flag.gpu.node_id
        flag.severity = SEVERITY[flag.kind]
        flag.last_seen_at = flag.closed_at or flag.opened_at
        flag.save(update_fields=["node", "severity", "last_seen_at"])


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0006_money_four_places"),
        ("telemetry", "0002_telemetry_names"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField("gpurollup", "covered_s", models.FloatField(null=True)),
        migrations.AddField("gpurollup", "busy_s", models.FloatField(null=True)),
        migrations.CreateModel(
            name="FleetSize",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(unique=True)),
                ("gpus", models.PositiveIntegerField(help_text="GPUs on active nodes")),
                (
                    "reporting",
                    models.PositiveIntegerField(help_text="GPUs that answered this round"),
                ),
            ],
        ),
        migrations.RemoveConstraint("flag", "telemetry_flag_one_open"),
        migrations.RemoveConstraint("flag", "telemetry_flag_kind_valid"),
        migrations.AddField(
            "flag",
            "node",
            models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="flags",
                to="catalog.node",
            ),
        ),
        migrations.AddField("flag", "severity", models.CharField(max_length=10, null=True)),
        migrations.AddField("flag", "last_seen_at", models.DateTimeField(null=True)),
        migrations.AddField("flag", "acknowledged_at", models.DateTimeField(blank=True, null=True)),
        migrations.AddField(
            "flag",
            "acknowledged_by",
            models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField("flag", "note", models.CharField(blank=True, max_length=500)),
        migrations.RunPython(flags_facts, migrations.RunPython.noop),
    ]
