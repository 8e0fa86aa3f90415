"""Raw samples partitioned by day: created ahead, a default partition as the safety net, and
retention by dropping whole days. (The migration that moved the old table's rows into day
partitions is tested with the other migrations, tests/anchorgpu/test_migrations.py.)"""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.db import connection

from catalog.models import Gpu
from telemetry.models import GpuSample
from telemetry.partitions import (
    DEFAULT,
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
