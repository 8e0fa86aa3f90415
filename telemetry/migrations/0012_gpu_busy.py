import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# Each GPU's newest busy minute among the minute rollups of the last day (the idle list
# looks two hours back), as telemetry.sql.ROLLUP_MINUTES keeps it from now on (a copy: a
# migration does not import code that may change after it).
BACKFILL = """
INSERT INTO telemetry_gpubusy (gpu_id, at)
SELECT gpu_id, max(at) FROM telemetry_gpurollup
WHERE bucket = %s AND at >= now() - interval '1 day' AND utilization_max > %s
GROUP BY gpu_id
"""


def backfill(apps, schema_editor):
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(BACKFILL, ["minute", threshold])


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0010_catalog_words_in_each_language"),
        ("telemetry", "0011_remote_source"),
    ]

    operations = [
        migrations.CreateModel(
            name="GpuBusy",
            fields=[
                (
                    "gpu",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="catalog.gpu",
                    ),
                ),
                ("at", models.DateTimeField()),
            ],
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
