"""Rollups of the raw samples: per-GPU hours and days that hold sums, the fleet's minutes,
hours and days per model and region, each GPU's newest busy minute; and retention.

No per-GPU minute is stored. Each shard of GPUs (`gpu_id // ROLLUP_SHARD_SIZE`) is read
once per run, in its own short transaction, by one statement (`sql.SHARD_ROLLUP`) that
keeps the GPU-minutes inside itself and writes the closed GPU hours, the shard's fleet
minutes and busy minutes, and the shard's mark (`RollupMark`), and notes the earliest hour
it wrote (`HoursWritten`). Then the GPU days and the fleet's hours and days are summed from
the hours (`fleet_rollups_refresh`, which takes those notes). Every row is upserted: a
repeated run rewrites the same rows, and a run after an outage is the same statement over
the backlog, `ROLLUP_MAX_HOURS_PER_PASS` hours a pass (each pass inside the task's time
limit).

Beat's task starts a run (`rollup_start`) and queues each shard's pass as a task of its own
(the `rollup` queue), each followed by a refresh; `telemetry_rollup` runs the same pieces
one after another in one process.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Min

from core.db import db_now
from telemetry import sql
from telemetry.models import (
    FleetRollup,
    GpuRollup,
    GpuSample,
    HoursWritten,
    Poll,
    RollupBucket,
    RollupMark,
)
from telemetry.partitions import months_prune, samples_prune

# Each bucket's length: `date_bin` by it from midnight UTC is its start.
STEP: dict[str, timedelta] = {
    RollupBucket.MINUTE: timedelta(minutes=1),
    RollupBucket.HOUR: timedelta(hours=1),
    RollupBucket.DAY: timedelta(days=1),
}


def bucket_floor(at: datetime, bucket: str) -> datetime:
    """The start of `at`'s bucket (minute, hour or day, from midnight UTC)."""
    at = at.astimezone(UTC).replace(second=0, microsecond=0)
    if bucket == RollupBucket.HOUR:
        return at.replace(minute=0)
    if bucket == RollupBucket.DAY:
        return at.replace(hour=0, minute=0)
    return at


def _earliest(*ats: datetime | None) -> datetime | None:
    present = [at for at in ats if at is not None]
    return min(present) if present else None


def _one(statement: str, params: Any = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0]


def _shards() -> list[int]:
    size = settings.ANCHORGPU["ROLLUP_SHARD_SIZE"]
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLLUP_SHARDS, [size])
        return [shard for (shard,) in cursor.fetchall()]


@transaction.atomic
def _take_rewritten(shards: list[int]) -> None:
    """Marks moved back to the earliest minute an ingest rewrote since the last run
    (`SamplesRewritten`: the remote source re-pulls minutes late); marks of shards that no
    longer have GPUs dropped (they would hold the fleet's hours back)."""
    RollupMark.objects.exclude(shard__in=shards).delete()
    with connection.cursor() as cursor:
        cursor.execute(sql.REWRITTEN_TAKE)
        rewritten = cursor.fetchone()[0]
    if rewritten is not None:
        minute, hour = bucket_floor(rewritten, "minute"), bucket_floor(rewritten, "hour")
        RollupMark.objects.filter(minutes_until__gt=minute).update(minutes_until=minute)
        RollupMark.objects.filter(hours_until__gt=hour).update(hours_until=hour)


Marks = tuple[datetime | None, datetime | None]  # (minutes until, hours until)


def _marks_at_start() -> Marks:
    """Where a shard without a mark of its own starts (a new shard of GPUs, a changed
    shard size), taken when the run begins: where the shards stood (the least of each);
    before any mark, after the newest fleet minute and GPU hour (rows kept from before the
    marks); None where neither is: the shard's oldest raw sample (`shard_rollup`)."""
    marks = RollupMark.objects.order_by("minutes_until").first()
    if marks is not None:
        hours = RollupMark.objects.order_by("hours_until").first()
        return marks.minutes_until, hours.hours_until if hours else marks.hours_until
    minute = (
        FleetRollup.objects.filter(bucket=RollupBucket.MINUTE)
        .order_by("-at")
        .values_list("at", flat=True)
        .first()
    )
    hour = _one(sql.newest("telemetry_gpuhour"))
    return (
        minute + STEP["minute"] if minute else None,
        hour + STEP["hour"] if hour else None,
    )


@transaction.atomic
def shard_rollup(
    *, shard: int, now: datetime, default: Marks = (None, None)
) -> dict[str, Any] | None:
    """One shard's pass over its raw samples since its mark (`sql.SHARD_ROLLUP`), in its own
    transaction. The newest minute rolled is rolled again (a poll's samples may commit
    after the minute closed), and an hour closes once its last minute was rolled twice. A
    shard without a mark starts at `default` (`_marks_at_start`), else at its oldest raw
    sample, else (nothing to read) now. A backlog longer than `ROLLUP_MAX_HOURS_PER_PASS`
    is read that many hours at a time ("capped": true; the next pass goes on from its
    mark). None: another run holds the shard, or a later run has passed it already (a task
    queued before it, taken after it)."""
    if not _one(sql.ROLLUP_LOCK, [shard]):
        return None
    size = settings.ANCHORGPU["ROLLUP_SHARD_SIZE"]
    gpu_lo, gpu_hi = shard * size, (shard + 1) * size
    minute_end = bucket_floor(now, "minute")
    hour_end = bucket_floor(minute_end - STEP["minute"], "hour")
    mark = RollupMark.objects.filter(shard=shard).first()
    if mark is not None and mark.minutes_until > minute_end:
        return None  # its mark would move back: the minutes would be read again for nothing
    if mark is not None:
        minutes_until, hours_until = mark.minutes_until, mark.hours_until
    else:
        oldest = None
        if None in default:
            oldest = (
                GpuSample.objects.filter(gpu_id__gte=gpu_lo, gpu_id__lt=gpu_hi)
                .order_by("at")
                .values_list("at", flat=True)
                .first()
            )
        minutes_until = bucket_floor(default[0] or oldest or minute_end, "minute")
        hours_until = bucket_floor(default[1] or oldest or minute_end, "hour")
    # The newest minute rolled is rolled again: late samples land in it.
    again = STEP["minute"] if mark is not None else timedelta(0)
    minutes_from = min(minutes_until - again, minute_end)
    hours_from = min(hours_until, hour_end)
    read_from = min(minutes_from, hours_from) if hours_from < hour_end else minutes_from
    # A backlog longer than the cap (after an outage) is read a whole number of hours at a
    # time: this pass stops a minute past the last whole hour within the cap (at least the
    # hour after `read_from`'s), so it closes that hour by the rule above (hour_end), and
    # the next pass starts from it, not from an hour it would have to read again.
    cap = timedelta(hours=settings.ANCHORGPU["ROLLUP_MAX_HOURS_PER_PASS"])
    stop = STEP["minute"] + max(
        bucket_floor(read_from + cap, "hour"), bucket_floor(read_from, "hour") + STEP["hour"]
    )
    capped = stop < minute_end
    if capped:
        minute_end, hour_end = stop, stop - STEP["minute"]
        minutes_from = min(minutes_from, minute_end)
        hours_from = min(hours_until, hour_end)
    marks = (minute_end, max(hours_from, hour_end))
    if capped:  # a mark already past the stop (one far ahead of the other) stays
        marks = (max(marks[0], minutes_until), max(marks[1], hours_until))
    with connection.cursor() as cursor:
        # The samples come out of their window sorted per GPU and are grouped as they come;
        # the planner cannot count the GPU-minutes of the union (each GPU's sample before
        # the range joins it) and would hash them, spilling to disk at scale.
        cursor.execute("SET LOCAL enable_hashagg = off")
        params: dict[str, Any] = {  # Any: the stubs' parameter types leave out timedelta
            "shard": shard, "gpu_lo": gpu_lo, "gpu_hi": gpu_hi, "read_from": read_from,
            "minutes_from": minutes_from, "minute_end": minute_end, "hours_from": hours_from,
            "hour_end": hour_end, "minute": RollupBucket.MINUTE,
            "minutes_mark": marks[0], "hours_mark": marks[1],
            "threshold": settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"],
        }  # fmt: skip
        cursor.execute(sql.SHARD_ROLLUP, params)
        hours, first_hour, fleet_minutes = cursor.fetchone()
        cursor.execute("RESET enable_hashagg")
    if first_hour is not None:  # for the refresh, committed with the hours
        HoursWritten.objects.create(shard=shard, at=first_hour)
    return {
        "hours": hours,
        "first_hour": first_hour,
        "fleet_minutes": fleet_minutes,
        "capped": capped,
    }


def rollup_start() -> tuple[list[int], Marks]:
    """A run's start, before any shard's pass: the shards, the marks moved back where
    ingests rewrote samples (`_take_rewritten`), and where a shard without a mark starts
    (`_marks_at_start`), the same for every pass of the run (as the run's `now` is)."""
    shards = _shards()
    _take_rewritten(shards)
    default = _marks_at_start()
    minutes, hours = default
    if minutes is not None and hours is not None:
        # A shard new to the marks gets one where the others stand, so it holds the fleet's
        # hours back until its own pass, as theirs do: a refresh after another shard's pass
        # would otherwise sum the hours without its GPUs (until its pass's note came).
        RollupMark.objects.bulk_create(
            [RollupMark(shard=shard, minutes_until=minutes, hours_until=hours) for shard in shards],
            ignore_conflicts=True,
        )
    return shards, default


def telemetry_rollup(*, now: datetime | None = None) -> dict[str, Any]:
    """A whole run in this process: every shard's passes (`shard_rollup`) one after another,
    as many as its backlog takes (each capped at `ROLLUP_MAX_HOURS_PER_PASS`), then the GPU
    days and the fleet's hours and days from the hours every shard has closed. Beat's task
    runs the same passes as tasks of their own (telemetry.tasks)."""
    now = now or db_now()
    shards, default = rollup_start()
    counts: dict[str, Any] = {"hour": 0, "fleet_minute": 0, "skipped": 0, "passes": 0}
    for shard in shards:
        done: dict[str, Any] | None = {"capped": True}
        while done is not None and done["capped"]:
            done = shard_rollup(shard=shard, now=now, default=default)
            if done is None:
                counts["skipped"] += 1
                break
            counts["passes"] += 1
            counts["hour"] += done["hours"]
            counts["fleet_minute"] += done["fleet_minutes"]
    counts.update(fleet_rollups_refresh())
    return counts


def hours_closed() -> datetime | None:
    """The end of the hours every shard has closed (None: no shard has run yet)."""
    mark = RollupMark.objects.order_by("hours_until").first()
    if mark is not None:
        return mark.hours_until
    newest = _one(sql.newest("telemetry_gpuhour"))
    return newest + STEP["hour"] if newest else None


@transaction.atomic
def fleet_rollups_refresh(*, written_hour: datetime | None = None) -> dict[str, int]:
    """GPU days from GPU hours, and the fleet's hours and days (per model and region) from
    the GPU hours and days, up to the hours every shard has closed: each from the bucket
    after its newest one, or from the earliest hour the passes wrote since the last refresh
    (`HoursWritten`, taken here) or `written_hour` where that is earlier; on a first run,
    from the oldest GPU hour. One at a time: a second waits for the first, then finds
    little or nothing to do. Also what writes GPU hours itself (the demo) calls."""
    counts = {"day": 0, "fleet_hour": 0, "fleet_day": 0}
    _one(sql.ROLLUP_LOCK_WAIT, [-1])
    # Taken before the marks are read: every pass whose note is taken here has committed
    # its hours and its mark, so this refresh sums them. A pass that commits after the
    # take leaves its note for the refresh it queues (a pass that commits between the take
    # and the marks' read moves `closed` on, and its hours are read all the same).
    written_hour = _earliest(written_hour, _one(sql.HOURS_WRITTEN_TAKE))
    closed = hours_closed()
    oldest = _one(sql.OLDEST_HOUR)
    if closed is None or oldest is None:
        return counts
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    newest_day = _one(sql.newest("telemetry_gpuday"))
    since = _earliest(newest_day + STEP["day"] if newest_day else oldest, written_hour)
    until = bucket_floor(closed, "day")
    written_day = None
    assert since is not None
    if bucket_floor(since, "day") < until:
        params = {"since": bucket_floor(since, "day"), "until": until}
        with connection.cursor() as cursor:
            cursor.execute(sql.GPU_DAYS, params)
            counts["day"], written_day = cursor.fetchone()
    for bucket, table, written, end in (
        (RollupBucket.HOUR, "telemetry_gpuhour", written_hour, closed),
        (RollupBucket.DAY, "telemetry_gpuday", written_day, until),
    ):
        last = FleetRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()  # fmt: skip
        start = _earliest(last + STEP[bucket] if last else oldest, written)
        assert start is not None
        start = bucket_floor(start, bucket)
        if start >= end:
            continue
        FleetRollup.objects.filter(bucket=bucket, at__gte=start, at__lt=end).delete()
        with connection.cursor() as cursor:
            cursor.execute(
                sql.fleet_rollup(table),
                {"bucket": bucket, "since": start, "until": end, "threshold": threshold},
            )
            counts[f"fleet_{bucket}"] = cursor.rowcount
    return counts


# Raw samples stay this long after the rollup has read them, whatever the retention: the
# holdings' edges of an hour are written from them on the minute after the rollup closes it.
ROLLED_MARGIN = timedelta(hours=1)


def samples_needed_from() -> datetime | None:
    """Raw samples from here on are still to be read (by the rollup, then the holdings'
    edges): the least of every shard's marks, less ROLLED_MARGIN. None: no shard has run yet,
    so none has been read."""
    least = RollupMark.objects.aggregate(minutes=Min("minutes_until"), hours=Min("hours_until"))
    if least["minutes"] is None:
        return None
    return min(least["minutes"], least["hours"]) - ROLLED_MARGIN


def telemetry_prune(*, now: datetime | None = None) -> dict:
    """Drop what is past its retention: raw samples and polls after RAW_RETENTION (never a
    sample the rollup has not read: while it is behind, as after a workers' outage, the
    raw samples wait for it, and where it has never run none goes), GPU hours and days and
    the fleet's rows after ROLLUP_RETENTION."""
    now = now or db_now()
    conf = settings.ANCHORGPU
    raw_cutoff = now - conf["RAW_RETENTION"]
    needed = samples_needed_from()
    samples = (
        samples_prune(before=min(raw_cutoff, needed))
        if needed is not None
        else {"partitions_dropped": 0, "samples": 0}
    )
    polls, _ = Poll.objects.filter(at__lt=raw_cutoff).delete()
    # GPU hours and days by the month; the fleet's rows per bucket, so each is a range of
    # the (bucket, at, …) index: `at` alone is no index's first column.
    before = now - conf["ROLLUP_RETENTION"]
    rollups = months_prune(before=before)
    FleetRollup.objects.filter(bucket__in=RollupBucket.values, at__lt=before).delete()
    GpuRollup.objects.filter(bucket__in=RollupBucket.values, at__lt=before).delete()
    return {**samples, "polls": polls, **rollups}


@transaction.atomic
def hours_copy(table: str, rows) -> None:
    """Write GPU hour (day) rows (tuples of gpu_id, at and `sql.FIGURES` in order) with COPY
    into `table` (telemetry_gpuhour or telemetry_gpuday)."""
    statement = sql.copy_text(table, ("gpu_id", "at", *sql.FIGURES))
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for row in rows:
            copy.write_row(row)
