"""Polls, samples, rollups and flags now belong to the telemetry app (telemetry 0001 takes
the models and their rows; nothing is dropped here)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("rentals", "0003_rollup_day_bucket"), ("telemetry", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="Flag"),
                migrations.DeleteModel(name="GpuRollup"),
                migrations.DeleteModel(name="GpuSample"),
                migrations.DeleteModel(name="Poll"),
            ],
        )
    ]
