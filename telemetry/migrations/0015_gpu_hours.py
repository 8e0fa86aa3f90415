"""GPU hours and days that hold sums, partitioned by month; the fleet rollups get a shard
column (each shard's pass writes its own fleet minutes); the rollup's marks per shard.

The hour and day rows of the old per-GPU rollups become GPU hours and days (an average ×
its samples is the sum it was made from), so nothing closed is lost. A migration does not
import code that may change after it: the partition SQL is copied from
telemetry/partitions.py as it is today.
"""

from datetime import UTC, datetime

from django.db import migrations, models

FIGURES = """
    gpu_id bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    samples integer NOT NULL,
    util_sum double precision NOT NULL,
    util_samples integer NOT NULL,
    util_max double precision NULL,
    mem_max_mib double precision NULL,
    mem_total_mib double precision NULL,
    power_sum double precision NOT NULL,
    power_samples integer NOT NULL,
    temp_max_c double precision NULL,
    energy_j double precision NULL,
    covered_s double precision NOT NULL,
    busy_s double precision NOT NULL
"""

TABLES = ("telemetry_gpuhour", "telemetry_gpuday")

CREATE = "".join(
    f"""
CREATE TABLE {table} ({FIGURES}, CONSTRAINT {table}_pkey PRIMARY KEY (gpu_id, at))
    PARTITION BY RANGE (at);
CREATE INDEX {table}_at ON {table} (at);
CREATE TABLE {table}_default PARTITION OF {table} DEFAULT;
"""
    for table in TABLES
)
DROP = "".join(f"DROP TABLE {table};" for table in TABLES)

# The old hour (day) rows as GPU hours (days): averages × samples back into sums.
CONVERT = """
INSERT INTO {table} (gpu_id, at, samples, util_sum, util_samples, util_max, mem_max_mib,
    mem_total_mib, power_sum, power_samples, temp_max_c, energy_j, covered_s, busy_s)
SELECT gpu_id, at, samples, coalesce(utilization_avg * samples, 0),
    CASE WHEN utilization_avg IS NULL THEN 0 ELSE samples END, utilization_max,
    memory_used_max_mib, memory_total_mib, coalesce(power_avg_w * samples, 0),
    CASE WHEN power_avg_w IS NULL THEN 0 ELSE samples END, temperature_max_c, energy_j,
    coalesce(covered_s, 0), coalesce(busy_s, 0)
FROM telemetry_gpurollup WHERE bucket = %s
"""


def _month(at):
    return datetime(at.year, at.month, 1, tzinfo=UTC)


def _next_month(month):
    return datetime(month.year + month.month // 12, month.month % 12 + 1, 1, tzinfo=UTC)


def convert(apps, schema_editor):
    """A partition per month the old rows have (and this month and the next), then the
    rows."""
    with schema_editor.connection.cursor() as cursor:
        for table, bucket in zip(TABLES, ("hour", "day"), strict=True):
            cursor.execute(
                "SELECT DISTINCT date_trunc('month', at, 'UTC') FROM telemetry_gpurollup"
                " WHERE bucket = %s",
                [bucket],
            )
            now = _month(datetime.now(UTC))
            months = {_month(at.astimezone(UTC)) for (at,) in cursor.fetchall()}
            months |= {now, _next_month(now)}
            for month in sorted(months):
                cursor.execute(
                    f"CREATE TABLE {table}_{month:%Y%m} PARTITION OF {table}"
                    " FOR VALUES FROM (%s) TO (%s)",
                    [month, _next_month(month)],
                )
                cursor.execute(
                    f"ALTER TABLE {table}_{month:%Y%m} SET (autovacuum_vacuum_insert_scale_factor"
                    " = 0.01, autovacuum_analyze_scale_factor = 0.005)"
                )
            cursor.execute(CONVERT.format(table=table), [bucket])


def _figures():
    return [
        ("gpu_id", models.BigIntegerField()),
        ("at", models.DateTimeField()),
        ("samples", models.IntegerField()),
        ("util_sum", models.FloatField()),
        ("util_samples", models.IntegerField()),
        ("util_max", models.FloatField(null=True)),
        ("mem_max_mib", models.FloatField(null=True)),
        ("mem_total_mib", models.FloatField(null=True)),
        ("power_sum", models.FloatField()),
        ("power_samples", models.IntegerField()),
        ("temp_max_c", models.FloatField(null=True)),
        ("energy_j", models.FloatField(null=True)),
        ("covered_s", models.FloatField()),
        ("busy_s", models.FloatField()),
        ("pk", models.CompositePrimaryKey("gpu_id", "at", blank=True, editable=False, primary_key=True, serialize=False)),
    ]  # fmt: skip


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0014_poll_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="GpuHour",
                    fields=_figures(),
                    options={"indexes": [models.Index(fields=["at"], name="telemetry_gpuhour_at")]},
                ),
                migrations.CreateModel(
                    name="GpuDay",
                    fields=_figures(),
                    options={"indexes": [models.Index(fields=["at"], name="telemetry_gpuday_at")]},
                ),
            ],
            database_operations=[migrations.RunSQL(CREATE, DROP)],
        ),
        migrations.CreateModel(
            name="RollupMark",
            fields=[
                ("shard", models.IntegerField(primary_key=True, serialize=False)),
                ("minutes_until", models.DateTimeField()),
                ("hours_until", models.DateTimeField()),
            ],
        ),
        migrations.RemoveConstraint(model_name="fleetrollup", name="telemetry_fleetrollup_once"),
        migrations.AddField(
            model_name="fleetrollup", name="shard", field=models.IntegerField(default=0)
        ),
        migrations.AddConstraint(
            model_name="fleetrollup",
            constraint=models.UniqueConstraint(
                fields=("bucket", "at", "gpu_model", "region", "shard"),
                name="telemetry_fleetrollup_once",
            ),
        ),
        migrations.RunPython(convert, migrations.RunPython.noop),
    ]
