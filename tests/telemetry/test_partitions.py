"""Raw samples partitioned by day, GPU hours and days by month: created ahead, a default
partition as the safety net, and retention by dropping whole days (months). (The migration that moved the old table's rows into day
partitions is tested with the other migrations, tests/anchorgpu/test_migrations.py.)"""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from catalog.models import Gpu
from telemetry.models import GpuHour, GpuSample
from telemetry.partitions import (
    DEFAULT,
    month_partition_name,
    month_partitions,
    month_partitions_ensure,
    months_prune,
    partition_name,
    sample_partition_create,
    sample_partitions,
    sample_partitions_ensure,
    samples_prune,
)

DAY = date(2025, 3, 10)  # long before the migration's partitions: no partition yet
NOON = datetime(2025, 3, 10, 12, tzinfo=UTC)


def _where(ids) -> dict[int, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, tableoid::regclass::text FROM telemetry_gpusample WHERE id = ANY(%s)",
            [list(ids)],
        )
        return dict(cursor.fetchall())


def _samples(gpu, times):
    return [GpuSample.objects.create(gpu=gpu, at=at, utilization=1.0).pk for at in times]


@pytest.mark.django_db
def test_rows_without_a_day_partition_wait_in_the_default_one_and_move_when_it_is_made(catalog):
    gpu = Gpu.objects.first()
    ids = _samples(gpu, [NOON, NOON + timedelta(days=1)])
    assert set(_where(ids).values()) == {DEFAULT}
    assert sample_partition_create(DAY) is True
    assert sample_partition_create(DAY) is False  # exists: nothing to do
    assert _where(ids) == {ids[0]: partition_name(DAY), ids[1]: DEFAULT}
    later = _samples(gpu, [NOON + timedelta(hours=11)])
    assert _where(later) == {later[0]: partition_name(DAY)}
    assert GpuSample.objects.filter(at__date=DAY).count() == 2


@pytest.mark.django_db
def test_partitions_are_made_from_yesterday_to_the_days_ahead(catalog, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "PARTITIONS_AHEAD_DAYS": 2}
    made = sample_partitions_ensure(now=NOON)
    days = set(sample_partitions())
    assert {DAY + timedelta(days=i) for i in range(-1, 3)} <= days
    assert made == 4
    assert sample_partitions_ensure(now=NOON) == 0


@pytest.mark.django_db
def test_retention_drops_whole_days_and_deletes_only_the_rest_before_the_cutoff(catalog):
    gpu = Gpu.objects.first()
    for i in range(3):
        sample_partition_create(DAY + timedelta(days=i))
    # two days of samples every 6 hours, and one far in the past (default partition)
    times = [NOON - timedelta(hours=12) + timedelta(hours=6 * i) for i in range(8)]
    ids = _samples(gpu, [*times, NOON - timedelta(days=400)])
    cutoff = NOON + timedelta(days=1)  # noon of the second day
    result = samples_prune(before=cutoff)
    assert result["partitions_dropped"] == 1  # the first day, whole
    assert partition_name(DAY) not in _where([]).values()
    assert DAY not in sample_partitions()
    # deleted one by one: the second day's morning samples and the one in the default
    assert result["samples"] == 3
    left = sorted(GpuSample.objects.filter(pk__in=ids).values_list("at", flat=True))
    assert left == [t for t in times if t >= cutoff]


# --- GPU hours and days, by month ------------------------------------------------------


def _hour(gpu_id, at):
    GpuHour.objects.create(
        gpu_id=gpu_id, at=at, samples=240, util_sum=2400.0, util_samples=240,
        power_sum=0.0, power_samples=0, covered_s=3600.0, busy_s=0.0,
    )  # fmt: skip


def _hour_tables() -> dict[datetime, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT at, tableoid::regclass::text FROM telemetry_gpuhour")
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_month_partitions_take_their_rows_from_the_default_one_and_retention_drops_them():
    march, april = NOON, NOON + timedelta(days=30)  # 2025-03-10, 2025-04-09
    _hour(1, march)
    _hour(1, april)
    assert set(_hour_tables().values()) == {"telemetry_gpuhour_default"}
    made = month_partitions_ensure(now=april)  # March to May, hours and days
    assert made == 6 and month_partitions_ensure(now=april) == 0
    assert month_partitions("telemetry_gpuhour")[:3] == [
        date(2025, 3, 1), date(2025, 4, 1), date(2025, 5, 1)
    ]  # fmt: skip
    assert _hour_tables() == {
        march: month_partition_name("telemetry_gpuhour", date(2025, 3, 1)),
        april: month_partition_name("telemetry_gpuhour", date(2025, 4, 1)),
    }
    # Retention drops the months wholly before the cutoff; the month it falls in stays.
    pruned = months_prune(before=datetime(2025, 4, 15, tzinfo=UTC))
    assert pruned == {"month_partitions_dropped": 2, "rollups": 0}  # March, hours and days
    assert list(_hour_tables()) == [april]
    assert date(2025, 3, 1) not in month_partitions("telemetry_gpuday")
