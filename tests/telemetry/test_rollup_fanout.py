"""Beat's rollup task fans the shards out as tasks of their own on the rollup queue, each
followed by a refresh of the sums after the shards. Real workers take them; what they write
equals the serial run's rows for the same samples. The hours a pass wrote reach the fleet's
hours and days whichever refresh runs, even one that was already running when the pass
committed, and a shard that has not run yet holds the fleet's hours back."""

import threading
from datetime import timedelta

import psycopg
import pytest
from celery.contrib.testing.worker import start_worker
from django.db import connection

from anchorgpu import queues
from anchorgpu.celery import app
from catalog.models import Gpu
from core.db import db_now
from telemetry import sql
from telemetry.models import (
    FleetRollup,
    GpuHour,
    GpuSample,
    HoursWritten,
    RollupMark,
)
from telemetry.rollup import (
    bucket_floor,
    fleet_rollups_refresh,
    hours_closed,
    rollup_start,
    shard_rollup,
    telemetry_rollup,
)
from telemetry.tasks import telemetry_rollup_task
from tests.support.rollups import (
    HOUR,
    Shards,
    rollup_rows,
    rollups_undo,
    samples_write,
    shards_of_a_third,
)
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


@pytest.fixture
def shards(catalog, settings) -> Shards:
    return shards_of_a_third(settings)


def test_the_fanned_out_run_writes_what_the_serial_run_writes(
    shards, settings, django_assert_num_queries
):
    """Two days of samples on GPUs in three or more shards, rolled by beat's task through
    real workers (three threads: passes and refreshes run side by side), equal the serial
    run's GPU hours, GPU days, fleet minutes, hours and days, busy minutes and marks. One
    pass a shard reads the whole backlog here (a capped catch-up: test_rollup_cap.py)."""
    settings.ANCHORGPU = {**settings.ANCHORGPU, "ROLLUP_MAX_HOURS_PER_PASS": 100}
    now = db_now()
    samples_write(bucket_floor(now, "hour") - 50 * HOUR, hours=50)  # up to the current hour
    app.control.purge()
    with start_worker(
        app, pool="threads", concurrency=3, perform_ping_check=False, shutdown_timeout=30,
        queues=[queues.ROLLUP],
    ):  # fmt: skip
        assert telemetry_rollup_task.apply().get() == len(shards.ids)
        # Every pass has moved its mark, and the hours each wrote were taken by a refresh
        # (which read every mark after taking them).
        assert wait_for(
            lambda: (
                RollupMark.objects.count() == len(shards.ids) and not HoursWritten.objects.exists()
            ),
            timeout=120,
        )
    app.control.purge()  # the refreshes still queued: each would find nothing to do
    # A refresh after the last one: the lock, the notes (none), the ends; nothing written.
    with django_assert_num_queries(9):  # BEGIN … COMMIT
        assert fleet_rollups_refresh() == {"day": 0, "fleet_hour": 0, "fleet_day": 0}
    fanned_out = rollup_rows()
    run_minute = RollupMark.objects.values_list("minutes_until", flat=True).distinct().get()

    assert {gpu_id // shards.size for gpu_id, *_ in fanned_out["gpu_hours"]} == set(shards.ids)
    assert {row[0] for row in fanned_out["fleet"]} == {"minute", "hour", "day"}
    assert len(fanned_out["gpu_days"]) >= Gpu.objects.count()

    rollups_undo()
    telemetry_rollup(now=run_minute)
    assert rollup_rows() == fanned_out


def _late_sample(gpu, at, shards):
    """A re-pulled ingest: a sample in an hour rolled up already, and its shard's mark moved
    back to it (what a run's start does for every shard past it)."""
    GpuSample.objects.create(gpu=gpu, at=at, utilization=50.0)
    RollupMark.objects.filter(shard=shards.of(gpu)).update(
        minutes_until=bucket_floor(at, "minute"), hours_until=bucket_floor(at, "hour")
    )


def _fleet_hoursamples_write(at):
    return sum(FleetRollup.objects.filter(bucket="hour", at=at).values_list("samples", flat=True))


def _gpu_hoursamples_write(at):
    return sum(GpuHour.objects.filter(at=at).values_list("samples", flat=True))


def _other_connection():
    return psycopg.connect(**connection.get_connection_params(), autocommit=False)


def test_hours_written_while_a_refresh_runs_are_summed_by_the_next_refresh(shards):
    """A refresh takes the passes' notes, then works. A pass that commits after the take
    leaves its note for the next refresh (the one it queues), which rewrites the hour."""
    now = db_now()
    t0 = bucket_floor(now, "hour") - 4 * HOUR
    samples_write(t0, hours=3)
    telemetry_rollup(now=now)
    before = _fleet_hoursamples_write(t0)
    assert before == _gpu_hoursamples_write(t0) > 0

    gpu = Gpu.objects.order_by("pk").first()
    _late_sample(gpu, t0 + timedelta(seconds=30), shards)
    with _other_connection() as running:  # a refresh, past its take, still at work
        running.execute(sql.ROLLUP_LOCK_WAIT, [-1])
        assert running.execute(sql.HOURS_WRITTEN_TAKE).fetchone() == (None,)
        assert shard_rollup(shard=shards.of(gpu), now=now)["hours"] > 0
        running.commit()
    # The pass's note outlived the refresh that was running.
    assert list(HoursWritten.objects.values_list("shard", "at")) == [(shards.of(gpu), t0)]
    assert _fleet_hoursamples_write(t0) == before
    fleet_rollups_refresh()
    assert not HoursWritten.objects.exists()
    assert _fleet_hoursamples_write(t0) == _gpu_hoursamples_write(t0) == before + 1


def test_a_refresh_queued_while_another_runs_waits_for_it_and_does_its_turn(shards):
    """Passes finish side by side: a refresh that finds another at work waits for it (it
    used to return at once, and the hours its pass wrote were summed by nobody)."""
    now = db_now()
    t0 = bucket_floor(now, "hour") - 4 * HOUR
    samples_write(t0, hours=3)
    telemetry_rollup(now=now)
    before = _fleet_hoursamples_write(t0)
    gpu = Gpu.objects.order_by("pk").first()
    _late_sample(gpu, t0 + timedelta(seconds=30), shards)
    shard_rollup(shard=shards.of(gpu), now=now)

    done = {}

    def queued_refresh():
        try:
            done["counts"] = fleet_rollups_refresh()
        finally:
            connection.close()

    with _other_connection() as running:  # another refresh at work
        running.execute(sql.ROLLUP_LOCK_WAIT, [-1])
        waiting = threading.Thread(target=queued_refresh)
        waiting.start()
        assert wait_for(lambda: _waiting_for_the_refresh_lock() == 1)
        assert "counts" not in done
        running.commit()
    waiting.join(timeout=30)
    assert done["counts"]["fleet_hour"] > 0
    assert _fleet_hoursamples_write(t0) == _gpu_hoursamples_write(t0) == before + 1


def _waiting_for_the_refresh_lock():
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0]


def test_a_shard_that_has_not_run_yet_holds_the_fleets_hours_back(shards):
    """One shard's pass of a later run, before the others': its hours are written and its
    note taken, but the fleet's hours stop where the other shards stand, a shard new to the
    marks among them (the run's start gives it a mark where the others stand); their passes
    bring the fleet's hours on, with every shard's GPUs in them."""
    now = db_now()
    t0 = bucket_floor(now, "hour") - 4 * HOUR
    samples_write(t0, hours=3)
    first_run = t0 + HOUR + timedelta(minutes=1)
    telemetry_rollup(now=first_run)
    assert hours_closed() == t0 + HOUR
    newest = FleetRollup.objects.filter(bucket="hour").order_by("-at").values_list("at", flat=True)
    assert newest.first() == t0

    first, *others = shards.ids
    RollupMark.objects.filter(shard=others[-1]).delete()  # as if its GPUs were new
    _, default = rollup_start()
    assert RollupMark.objects.get(shard=others[-1]).hours_until == t0 + HOUR  # where all stand
    shard_rollup(shard=first, now=now, default=default)
    fleet_rollups_refresh()
    assert not HoursWritten.objects.exists()
    assert GpuHour.objects.filter(at=t0 + 2 * HOUR).exists()
    assert hours_closed() == t0 + HOUR
    assert newest.first() == t0  # held back by the shards that have not run

    for shard in others:
        shard_rollup(shard=shard, now=now, default=default)
    fleet_rollups_refresh()
    assert newest.first() == t0 + 2 * HOUR
    for at in (t0, t0 + HOUR, t0 + 2 * HOUR):
        assert _fleet_hoursamples_write(at) == _gpu_hoursamples_write(at) > 0


def test_a_pass_taken_after_a_later_runs_pass_of_its_shard_changes_nothing(shards):
    """Two workers: a run's pass can be taken after the next run's pass of the same shard.
    It finds the mark past its minute and leaves it (moved back, the shard's minutes would
    be read again for nothing and the fleet's hours held back)."""
    now = db_now()
    samples_write(bucket_floor(now, "hour") - 2 * HOUR, hours=1)
    telemetry_rollup(now=now)
    marks = list(RollupMark.objects.order_by("shard").values_list())
    assert shard_rollup(shard=shards.ids[0], now=now - timedelta(minutes=1)) is None
    assert shard_rollup(shard=shards.ids[0], now=now) is not None  # the same minute: again
    assert list(RollupMark.objects.order_by("shard").values_list()) == marks
