"""A shard's pass reads at most `ROLLUP_MAX_HOURS_PER_PASS` hours of its backlog, so a
long outage is caught up a few hours a pass, each pass inside the task's time limit, and
the passes together write what one pass over the whole backlog writes: the serial run
loops them to the run's minute, beat's runs (and the pass's own next task) step on."""

from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker

from anchorgpu import queues
from anchorgpu.celery import app
from catalog.models import Gpu
from core.db import db_now
from telemetry.models import FleetRollup, GpuHour, HoursWritten, RollupMark
from telemetry.rollup import (
    bucket_floor,
    fleet_rollups_refresh,
    hours_closed,
    rollup_start,
    shard_rollup,
    telemetry_rollup,
)
from telemetry.tasks import rollup_fan_out
from tests.support.rollups import (
    HOUR,
    Shards,
    rollup_rows,
    rollups_undo,
    samples_write,
    shards_of_a_third,
)
from tests.support.waiting import wait_for

MINUTE = timedelta(minutes=1)


@pytest.fixture
def shards(catalog, settings) -> Shards:
    return shards_of_a_third(settings)


def _cap(settings, hours):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ROLLUP_MAX_HOURS_PER_PASS": hours}


def _backlog():
    """Five hours of samples from 21:00 two days ago, across a midnight (so GPU days and the
    fleet's days close), nothing rolled up; the workers come back half an hour after."""
    t0 = bucket_floor(db_now(), "day") - 27 * HOUR
    samples_write(t0, hours=5, reset_after=2 * HOUR + 30 * MINUTE)
    return t0, t0 + 5 * HOUR + 30 * MINUTE


def _uncapped(settings, now):
    """What one pass a shard over the whole backlog writes (the rows before are undone)."""
    rollups_undo()
    _cap(settings, 1000)
    counts = telemetry_rollup(now=now)
    return counts, rollup_rows()


def test_a_capped_pass_reads_its_cap_and_writes_only_the_hours_it_closed(shards, settings):
    """A shard's first pass reads its two hours from its oldest sample and a minute past
    them, so it closes both; its mark stops there, and the next pass goes on from it."""
    _cap(settings, 2)
    t0, now = _backlog()
    shard = shards.ids[0]
    gpus = Gpu.objects.filter(pk__gte=shard * shards.size, pk__lt=(shard + 1) * shards.size)

    done = shard_rollup(shard=shard, now=now)

    assert done["capped"] is True
    assert done["first_hour"] == t0
    assert list(RollupMark.objects.values_list("shard", "minutes_until", "hours_until")) == [
        (shard, t0 + 2 * HOUR + MINUTE, t0 + 2 * HOUR)
    ]
    hours = GpuHour.objects.values_list("gpu_id", "at")
    assert sorted(hours) == sorted((gpu.pk, at) for gpu in gpus for at in (t0, t0 + HOUR))
    assert done["hours"] == len(hours)
    minutes = FleetRollup.objects.filter(bucket="minute")
    assert set(minutes.values_list("shard", flat=True)) == {shard}
    assert min(minutes.values_list("at", flat=True)) == t0
    assert max(minutes.values_list("at", flat=True)) == t0 + 2 * HOUR  # the minute past
    assert list(HoursWritten.objects.values_list("shard", "at")) == [(shard, t0)]

    # The next pass: the next two hours, from the minute past them again.
    done = shard_rollup(shard=shard, now=now)
    assert (done["capped"], done["first_hour"]) == (True, t0 + 2 * HOUR)
    mark = RollupMark.objects.get()
    assert (mark.minutes_until, mark.hours_until) == (t0 + 4 * HOUR + MINUTE, t0 + 4 * HOUR)
    assert set(GpuHour.objects.values_list("at", flat=True)) == {t0 + h * HOUR for h in range(4)}

    # The last hour and the rest, up to the run's minute: not capped.
    done = shard_rollup(shard=shard, now=now)
    assert (done["capped"], done["first_hour"]) == (False, t0 + 4 * HOUR)
    mark = RollupMark.objects.get()
    assert (mark.minutes_until, mark.hours_until) == (bucket_floor(now, "minute"), t0 + 5 * HOUR)


def test_a_pass_makes_progress_with_a_cap_of_one_hour(shards, settings):
    """The least cap: each pass closes one hour (the hour after the one it starts in),
    and the last rolls the half hour after the samples up to the run's minute."""
    _cap(settings, 1)
    t0, now = _backlog()
    shard = shards.ids[0]
    for closed in range(1, 6):
        assert shard_rollup(shard=shard, now=now)["capped"] is True
        mark = RollupMark.objects.get()
        assert (mark.minutes_until, mark.hours_until) == (
            t0 + closed * HOUR + MINUTE,
            t0 + closed * HOUR,
        )
    assert shard_rollup(shard=shard, now=now)["capped"] is False
    mark = RollupMark.objects.get()
    assert (mark.minutes_until, mark.hours_until) == (bucket_floor(now, "minute"), t0 + 5 * HOUR)


def _beat_run(now):
    """One of beat's runs, its passes one after another (as the fan-out's tasks would)."""
    shards, default = rollup_start()
    done = [shard_rollup(shard=shard, now=now, default=default) for shard in shards]
    fleet_rollups_refresh()
    return done


def test_beats_runs_catch_up_a_few_hours_a_run_and_end_where_one_pass_would(shards, settings):
    """Five hours behind, a cap of two: three runs a minute apart, each bringing every
    shard's closed hours (and the fleet's) two hours on, write the GPU hours, GPU days, the
    fleet's minutes, hours and days, busy minutes and marks that one uncapped pass a shard
    writes over the same samples."""
    _cap(settings, 2)
    t0, now = _backlog()
    closed = []
    for run in range(10):
        done = _beat_run(now + run * MINUTE)
        closed.append(hours_closed())
        if not any(d["capped"] for d in done):
            break
    assert closed == [t0 + 2 * HOUR, t0 + 4 * HOUR, t0 + 5 * HOUR]
    capped = rollup_rows()
    assert {row[0] for row in capped["fleet"]} == {"minute", "hour", "day"}
    assert len(capped["gpu_days"]) == Gpu.objects.count()

    counts, uncapped = _uncapped(settings, now + 2 * MINUTE)
    assert counts["passes"] == len(shards.ids)
    assert capped == uncapped


def test_the_serial_run_catches_up_in_one_call_a_capped_pass_at_a_time(shards, settings):
    """`telemetry_rollup` (the tests', the demo's) loops each shard's capped passes to the
    run's minute: three passes a shard here, and the rows of one uncapped pass a shard."""
    _cap(settings, 2)
    t0, now = _backlog()

    counts = telemetry_rollup(now=now)

    assert counts["passes"] == 3 * len(shards.ids)
    assert hours_closed() == t0 + 5 * HOUR
    capped = rollup_rows()
    uncapped_counts, uncapped = _uncapped(settings, now)
    assert uncapped_counts["passes"] == len(shards.ids)
    assert capped == uncapped


@pytest.mark.django_db(transaction=True)
@pytest.mark.worker
def test_a_capped_pass_queues_its_shards_next_pass_at_once(shards, settings):
    """Through a real worker, one fan-out (no beat run after it) catches every shard up to
    its minute: each capped pass queues the shard's next pass of the same run."""
    _cap(settings, 2)
    t0, now = _backlog()
    app.control.purge()
    with start_worker(
        app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30,
        queues=[queues.ROLLUP],
    ):  # fmt: skip
        assert rollup_fan_out(now=now) == len(shards.ids)
        end = (bucket_floor(now, "minute"), t0 + 5 * HOUR)
        marks = RollupMark.objects.values_list("minutes_until", "hours_until")
        assert wait_for(
            lambda: (
                list(marks.distinct()) == [end]
                and marks.count() == len(shards.ids)
                and not HoursWritten.objects.exists()
            ),
            timeout=120,
        )
    app.control.purge()  # the refreshes still queued: each would find nothing to do
    fanned_out = rollup_rows()
    _, uncapped = _uncapped(settings, now)
    assert fanned_out == uncapped
