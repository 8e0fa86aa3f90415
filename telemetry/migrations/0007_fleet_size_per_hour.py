"""The fleet's size is kept per hour: the rows of every polling round so far fold into
their hour (the largest size, the fewest GPUs answering)."""

from django.db import migrations, models

FOLD = """
CREATE TEMPORARY TABLE fleet_size_hours ON COMMIT DROP AS
    SELECT date_trunc('hour', at, 'UTC') AS at, max(gpus) AS gpus, min(reporting) AS reporting
    FROM telemetry_fleetsize GROUP BY 1;
DELETE FROM telemetry_fleetsize;
INSERT INTO telemetry_fleetsize (at, gpus, reporting)
    SELECT at, gpus, reporting FROM fleet_size_hours;
"""


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0006_samples_partitioned_by_day")]

    operations = [
        migrations.RunSQL(FOLD, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="fleetsize",
            name="at",
            field=models.DateTimeField(help_text="the hour's start", unique=True),
        ),
        migrations.AlterField(
            model_name="fleetsize",
            name="gpus",
            field=models.PositiveIntegerField(help_text="most GPUs on active nodes in a round"),
        ),
        migrations.AlterField(
            model_name="fleetsize",
            name="reporting",
            field=models.PositiveIntegerField(help_text="fewest GPUs that answered a round"),
        ),
    ]
