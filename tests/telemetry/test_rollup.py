"""The rollup run's two ways of writing minutes (a plain insert after the newest minute, an
upsert at or before it), its bucket edges in UTC, and the hours and days it aggregates again
(only those holding minutes it wrote)."""

from datetime import UTC, datetime, timedelta

import pytest

from telemetry.models import GpuBusy, GpuRollup, GpuSample, SamplesRewritten
from telemetry.rollup import telemetry_rollup

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 9, 23, 58, tzinfo=UTC)  # two minutes before midnight UTC


def _samples(gpu, *seconds, utilization=10.0):
    GpuSample.objects.bulk_create(
        GpuSample(gpu=gpu, at=T0 + timedelta(seconds=s), utilization=utilization,
                  energy_j=1000.0 + s)
        for s in seconds
    )  # fmt: skip


def _minutes():
    return {
        (at - T0).total_seconds() / 60: (samples, util, energy)
        for at, samples, util, energy in GpuRollup.objects.filter(bucket="minute")
        .order_by("at")
        .values_list("at", "samples", "utilization_avg", "energy_j")
    }


def test_a_late_sample_rewrites_the_newest_minute_and_later_ones_are_added(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 0, 15, 30)
    counts = telemetry_rollup(now=T0 + timedelta(minutes=1))
    assert counts["minute"] == 1
    assert _minutes() == {0: (3, 10.0, 30.0)}

    # A late sample in the rolled minute, and the next minute's samples.
    _samples(gpu, 45, utilization=50.0)
    _samples(gpu, 60, 75)
    counts = telemetry_rollup(now=T0 + timedelta(minutes=2))
    assert counts["minute"] == 2  # the rewritten minute and the added one
    assert _minutes() == {0: (4, 20.0, 45.0), 1: (2, 10.0, 30.0)}
    assert GpuRollup.objects.filter(bucket="minute").count() == 2

    # The same run again changes nothing.
    telemetry_rollup(now=T0 + timedelta(minutes=2))
    assert _minutes() == {0: (4, 20.0, 45.0), 1: (2, 10.0, 30.0)}


def test_hours_and_days_start_at_utc_edges(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 90, 105, 120, 135)  # 23:59:30 … 00:00:15
    telemetry_rollup(now=T0 + timedelta(minutes=62))  # 01:00, the next day
    rows = {
        (bucket, at): (samples, energy)
        for bucket, at, samples, energy in GpuRollup.objects.values_list(
            "bucket", "at", "samples", "energy_j"
        )
    }
    midnight = T0 + timedelta(minutes=2)
    assert rows == {
        ("minute", midnight - timedelta(minutes=1)): (2, 15.0),
        ("minute", midnight): (2, 30.0),
        ("hour", midnight - timedelta(hours=1)): (2, 15.0),
        ("hour", midnight): (2, 30.0),
        ("day", midnight - timedelta(days=1)): (2, 15.0),
    }


def test_a_run_aggregates_only_the_hours_and_days_holding_minutes_it_wrote(catalog):
    gpu = catalog.nodes[0].gpus.first()
    _samples(gpu, 0, 15, 30, 150, 165)  # 23:58:00 … 00:00:45
    first = telemetry_rollup(now=T0 + timedelta(minutes=62))  # 01:00, the next day
    assert (first["hour"], first["day"]) == (2, 1)
    hours = dict(GpuRollup.objects.filter(bucket="hour").values_list("at", "samples"))

    # Nothing new: the newest minute is rolled again, changes nothing, and no hour or day
    # is aggregated again (what beat's run does every minute).
    again = telemetry_rollup(now=T0 + timedelta(minutes=63))
    assert (again["minute"], again["hour"], again["day"]) == (0, 0, 0)
    assert again["fleet_minute"] == again["fleet_hour"] == again["fleet_day"] == 0

    # A late sample in the closed hour before midnight: its minute, its hour and its day
    # are written again, the hour after midnight is not.
    GpuSample.objects.create(gpu=gpu, at=T0 + timedelta(seconds=5), utilization=10.0,
                             energy_j=1005.0)  # fmt: skip
    SamplesRewritten.objects.create(at=T0 + timedelta(seconds=5))
    late = telemetry_rollup(now=T0 + timedelta(minutes=64))
    assert (late["minute"], late["hour"], late["day"]) == (1, 1, 1)
    midnight = T0 + timedelta(minutes=2)
    assert dict(GpuRollup.objects.filter(bucket="hour").values_list("at", "samples")) == {
        **hours,
        midnight - timedelta(hours=1): 4,
    }
    assert GpuRollup.objects.get(bucket="day", at=midnight - timedelta(days=1)).samples == 4


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
    assert telemetry_rollup(now=T0 + timedelta(minutes=3))["minute"] >= 1
    assert newest_busy() == {busy.pk: 2}


def test_a_minutes_first_interval_starts_at_its_gpus_sample_before_up_to_an_hour_back(catalog):
    """A run rolls from the newest minute on, and each GPU's first sample in it takes its
    rise from that GPU's own newest sample before (within the hour before the run's first
    minute), looked up per GPU, not read with the fleet's whole hour: another GPU's later
    samples in between change nothing, and a sample further back starts no interval."""
    near, far, gone, other = catalog.nodes[0].gpus.order_by("index")[:4]
    t = T0 + timedelta(hours=2)

    def sample(gpu, minutes, energy):
        GpuSample.objects.create(gpu=gpu, at=t + timedelta(minutes=minutes), utilization=50.0,
                                 energy_j=energy)  # fmt: skip

    sample(gone, -111, 9000.0)  # 61 minutes before the second run's first minute
    sample(far, -70, 5000.0)  # 20 minutes before it
    sample(near, -50, 1000.0)  # the newest minute of the first run
    telemetry_rollup(now=t)

    for minutes in range(-49, 0):  # another GPU's samples in between, every minute
        sample(other, minutes, 0.0)
    sample(near, 0, 1600.0)
    sample(near, 0.25, 1615.0)
    sample(far, 0, 5100.0)
    sample(far, 0.5, 5130.0)
    sample(gone, 0, 9500.0)
    sample(gone, 0.25, 9515.0)
    telemetry_rollup(now=t + timedelta(minutes=1))

    minute = {
        gpu: (samples, energy, covered)
        for gpu, samples, energy, covered in GpuRollup.objects.filter(bucket="minute", at=t)
        .values_list("gpu_id", "samples", "energy_j", "covered_s")
    }  # fmt: skip
    # The rise from the sample before counts; its interval (over MAX_GAP) covers no time.
    assert minute == {
        near.pk: (2, 615.0, 15.0),
        far.pk: (2, 130.0, 30.0),
        gone.pk: (2, 15.0, 15.0),
    }
