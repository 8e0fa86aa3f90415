"""The rollup run: one pass per shard of GPUs writes the closed GPU hours, the fleet's
minutes and each GPU's newest busy minute (no per-GPU minute is stored); GPU days come from
the hours; bucket edges are in UTC; a rerun rewrites the same rows; a shard's mark lets a
run resume where each shard stood."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Sum

from telemetry.models import (
    FleetRollup,
    GpuBusy,
    GpuDay,
    GpuHour,
    GpuSample,
    RollupMark,
    SamplesRewritten,
)
from telemetry.rollup import telemetry_rollup

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 9, 23, 58, tzinfo=UTC)  # two minutes before midnight UTC
MIDNIGHT = T0 + timedelta(minutes=2)


def _samples(gpu, *seconds, utilization=10.0):
    GpuSample.objects.bulk_create(
        GpuSample(gpu=gpu, at=T0 + timedelta(seconds=s), utilization=utilization,
                  energy_j=1000.0 + s)
        for s in seconds
    )  # fmt: skip


def _fleet_minutes():
    """The fleet's minutes, summed over model, region and shard: (samples, average, energy)."""
    rows = (
        FleetRollup.objects.filter(bucket="minute")
        .values("at")
        .annotate(s=Sum("samples"), u=Sum("util_sum"), n=Sum("util_samples"), e=Sum("energy_j"))
        .order_by("at")
    )
    return {(r["at"] - T0).total_seconds() / 60: (r["s"], r["u"] / r["n"], r["e"]) for r in rows}


def _rows(model):
    return {
        at: (samples, energy)
        for at, samples, energy in model.objects.values_list("at", "samples", "energy_j")
    }


def test_a_late_sample_rewrites_the_newest_minute_and_a_rerun_changes_nothing(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 0, 15, 30)
    counts = telemetry_rollup(now=T0 + timedelta(minutes=1))
    assert counts["fleet_minute"] == 1
    assert _fleet_minutes() == {0: (3, 10.0, 30.0)}

    # A late sample in the rolled minute, and the next minute's samples.
    _samples(gpu, 45, utilization=50.0)
    _samples(gpu, 60, 75)
    counts = telemetry_rollup(now=T0 + timedelta(minutes=2))
    assert counts["fleet_minute"] == 2  # the newest minute rolled again, and the next one
    assert _fleet_minutes() == {0: (4, 20.0, 45.0), 1: (2, 10.0, 30.0)}

    # The same run again changes nothing.
    telemetry_rollup(now=T0 + timedelta(minutes=2))
    assert _fleet_minutes() == {0: (4, 20.0, 45.0), 1: (2, 10.0, 30.0)}
    assert FleetRollup.objects.filter(bucket="minute").count() == 2


def test_hours_and_days_start_at_utc_edges_and_hold_sums(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 90, 105, 120, 135)  # 23:59:30 … 00:00:15
    _samples(gpu, 150, utilization=None)  # a reading without utilisation
    telemetry_rollup(now=MIDNIGHT + timedelta(hours=1, minutes=1))  # 01:01, the next day
    assert _rows(GpuHour) == {
        MIDNIGHT - timedelta(hours=1): (2, 15.0),
        MIDNIGHT: (3, 45.0),
    }
    assert _rows(GpuDay) == {MIDNIGHT - timedelta(days=1): (2, 15.0)}
    hour = GpuHour.objects.get(at=MIDNIGHT)
    assert (hour.util_sum, hour.util_samples, hour.util_avg) == (20.0, 2, 10.0)
    assert (hour.covered_s, hour.gpu_id) == (45.0, gpu.pk)  # 00:00:00 takes 23:59:45 on


def test_an_hour_closes_once_its_last_minute_was_rolled_twice(catalog):
    """A poll's samples may commit after their minute closed: the run at 00:00 rolls
    23:59 but leaves the hour open; the run at 00:01 rolls 23:59 again and closes it."""
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 90)
    telemetry_rollup(now=MIDNIGHT + timedelta(seconds=5))
    assert not GpuHour.objects.exists()
    _samples(gpu, 105)  # committed late, in 23:59
    telemetry_rollup(now=MIDNIGHT + timedelta(minutes=1, seconds=5))
    assert _rows(GpuHour) == {MIDNIGHT - timedelta(hours=1): (2, 15.0)}


def test_a_rewritten_range_writes_its_hour_and_day_again(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 0, 15, 30, 150, 165)  # 23:58:00 … 00:00:45
    first = telemetry_rollup(now=MIDNIGHT + timedelta(hours=1, minutes=1))
    assert (first["hour"], first["day"]) == (2, 1)

    # Nothing new: no hour or day is written again (what beat's run does every minute).
    again = telemetry_rollup(now=MIDNIGHT + timedelta(hours=1, minutes=2))
    assert (again["hour"], again["day"], again["fleet_hour"], again["fleet_day"]) == (0, 0, 0, 0)

    # A late sample in the closed hour before midnight (a re-pulled ingest): its hour and
    # its day are written again.
    GpuSample.objects.create(gpu=gpu, at=T0 + timedelta(seconds=5), utilization=10.0,
                             energy_j=1005.0)  # fmt: skip
    SamplesRewritten.objects.create(at=T0 + timedelta(seconds=5))
    late = telemetry_rollup(now=MIDNIGHT + timedelta(hours=1, minutes=3))
    assert late["day"] == 1
    assert GpuHour.objects.get(at=MIDNIGHT - timedelta(hours=1)).samples == 4
    assert GpuHour.objects.get(at=MIDNIGHT).samples == 2
    assert GpuDay.objects.get(at=MIDNIGHT - timedelta(days=1)).samples == 4
    fleet_day = FleetRollup.objects.get(bucket="day", at=MIDNIGHT - timedelta(days=1))
    assert fleet_day.samples == 4


def test_each_gpus_newest_busy_minute_is_kept_and_never_moved_back(catalog):
    """What the staff dashboard's idle list reads: each GPU's newest minute rolled up with a
    sample over the active threshold (5 %). A quiet minute after it leaves it, a busy one
    moves it on, and minutes rolled again from before it (a re-pulled ingest) do not move
    it back; a GPU never busy has none."""
    busy, quiet = catalog.nodes[0].gpus.order_by("index")[:2]

    def newest_busy():
        return {
            gpu: (at - T0).total_seconds() / 60
            for gpu, at in GpuBusy.objects.values_list("gpu_id", "at")
        }

    _samples(busy, 0, 15)
    _samples(quiet, 0, 15, utilization=4.0)
    telemetry_rollup(now=T0 + timedelta(minutes=1))
    assert newest_busy() == {busy.pk: 0}

    _samples(busy, 60, 75, utilization=4.0)
    telemetry_rollup(now=T0 + timedelta(minutes=2))
    assert newest_busy() == {busy.pk: 0}

    _samples(busy, 120, 135)
    _samples(quiet, 120, 135, utilization=4.0)
    telemetry_rollup(now=T0 + timedelta(minutes=3))
    assert newest_busy() == {busy.pk: 2}

    # Minute 0 rolled again once minute 2's raw samples are gone: busy, but older.
    GpuSample.objects.filter(at__gte=T0 + timedelta(minutes=2)).delete()
    _samples(busy, 5)
    SamplesRewritten.objects.create(at=T0 + timedelta(seconds=5))
    assert telemetry_rollup(now=T0 + timedelta(minutes=3))["fleet_minute"] >= 1
    assert newest_busy() == {busy.pk: 2}


def test_a_reads_first_interval_starts_at_its_gpus_sample_before_up_to_an_hour_back(catalog):
    """Each GPU's first sample in a run's read takes its rise from that GPU's own newest
    sample before (within the hour before the read's start), looked up per GPU, not read
    with the fleet's whole hour: another GPU's later samples in between change nothing,
    and a sample further back starts no interval."""
    near, far, gone, other = catalog.nodes[0].gpus.order_by("index")[:4]
    t = MIDNIGHT + timedelta(hours=2)

    def sample(gpu, minutes, energy):
        GpuSample.objects.create(gpu=gpu, at=t + timedelta(minutes=minutes), utilization=50.0,
                                 energy_j=energy)  # fmt: skip

    sample(gone, -61, 9000.0)  # 61 minutes before the hour the second run reads
    sample(far, -20, 5000.0)
    sample(near, -50, 1000.0)
    for minutes in range(-49, 0):  # another GPU's samples in between, every minute
        sample(other, minutes, 0.0)
    telemetry_rollup(now=t + timedelta(minutes=1))  # closes the hours before t

    sample(near, 0, 1600.0)
    sample(near, 0.25, 1615.0)
    sample(far, 0, 5100.0)
    sample(far, 0.5, 5130.0)
    sample(gone, 0, 9500.0)
    sample(gone, 0.25, 9515.0)
    telemetry_rollup(now=t + timedelta(hours=1, minutes=1))  # closes the hour from t

    hour = {
        gpu: (samples, energy, covered)
        for gpu, samples, energy, covered in GpuHour.objects.filter(at=t)
        .values_list("gpu_id", "samples", "energy_j", "covered_s")
    }  # fmt: skip
    # The rise from the sample before counts; its interval (over MAX_GAP) covers no time.
    assert hour == {
        near.pk: (2, 615.0, 15.0),
        far.pk: (2, 130.0, 30.0),
        gone.pk: (2, 15.0, 15.0),
    }


def test_shards_write_their_own_fleet_minutes_and_readers_sum_them(catalog, settings):
    """With a shard per two GPU ids, each shard's pass writes its own fleet minute (the
    shard in its key); summed, they are the fleet's minute, and each shard has its mark."""
    gpus = list(catalog.nodes[0].gpus.order_by("pk")[:4])
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ROLLUP_SHARD_SIZE": 2}
    for gpu in gpus:
        _samples(gpu, 0, 15, 30)
    telemetry_rollup(now=T0 + timedelta(minutes=1))
    shards = {gpu.pk // 2 for gpu in gpus}
    assert len(shards) > 1
    minute = FleetRollup.objects.filter(bucket="minute")
    assert set(minute.values_list("shard", flat=True)) == shards
    assert _fleet_minutes() == {0: (12, 10.0, 120.0)}
    assert sum(minute.values_list("gpus", flat=True)) == 4
    assert set(RollupMark.objects.values_list("minutes_until", flat=True)) == {
        T0 + timedelta(minutes=1)
    }


def test_a_shard_left_behind_catches_up_from_its_own_mark(catalog, settings):
    """A run that stopped after some shards: the next run reads each shard from where it
    stood, so the hours of the shard left behind are written then, exactly."""
    first, second = catalog.nodes[0].gpus.order_by("pk")[:2]
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ROLLUP_SHARD_SIZE": 1}
    for gpu in (first, second):
        _samples(gpu, 0, 15, 30, 150)
    telemetry_rollup(now=T0 + timedelta(minutes=1))
    # The second GPU's shard stood still (its run stopped) while the first went on.
    RollupMark.objects.filter(shard=first.pk).update(
        minutes_until=MIDNIGHT + timedelta(hours=1), hours_until=MIDNIGHT + timedelta(hours=1)
    )
    telemetry_rollup(now=MIDNIGHT + timedelta(hours=1, minutes=1))
    assert not GpuHour.objects.filter(gpu_id=first.pk).exists()  # its mark was past them
    assert {
        at: samples
        for at, samples in GpuHour.objects.filter(gpu_id=second.pk).values_list("at", "samples")
    } == {MIDNIGHT - timedelta(hours=1): 3, MIDNIGHT: 1}
