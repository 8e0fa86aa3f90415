"""Per-minute, per-hour and per-day rollups of the raw samples, and retention.

Each run recomputes from the last bucket it wrote, so a run after an outage catches up and
a repeated run rewrites the same rows (ON CONFLICT … DO UPDATE): idempotent. Hours and days
are aggregated again only where a minute (an hour) under them was written or changed.
"""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from core.db import db_now
from telemetry import sql
from telemetry.models import FleetRollup, GpuRollup, GpuSample, Poll, RollupBucket
from telemetry.partitions import samples_prune


def _newest(bucket):
    return (
        GpuRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()
    )


def _oldest(bucket):
    return (
        GpuRollup.objects.filter(bucket=bucket).order_by("at").values_list("at", flat=True).first()
    )


# Hours from minutes, days from hours: each from the start of the first unrolled bucket.
COARSER = (
    (RollupBucket.HOUR, RollupBucket.MINUTE, lambda at: at.replace(minute=0, second=0, microsecond=0)),
    (RollupBucket.DAY, RollupBucket.HOUR, lambda at: at.replace(hour=0, minute=0, second=0, microsecond=0)),
)  # fmt: skip


BUCKET_START: dict[str, Callable[[datetime], datetime]] = {
    bucket: start for bucket, _source, start in COARSER
}

# Each bucket's length: `date_bin` by it from midnight UTC is its start (sql._BUCKET_OF_AT).
STEP = {
    RollupBucket.MINUTE: timedelta(minutes=1),
    RollupBucket.HOUR: timedelta(hours=1),
    RollupBucket.DAY: timedelta(days=1),
}


def _earliest(*ats):
    present = [at for at in ats if at is not None]
    return min(present) if present else None


def bucket_floor(at: datetime, bucket: str) -> datetime:
    """The start of `at`'s bucket (minute, hour or day, from midnight UTC)."""
    at = at.astimezone(UTC).replace(second=0, microsecond=0)
    if bucket == RollupBucket.MINUTE:
        return at
    return BUCKET_START[bucket](at)


@transaction.atomic
def telemetry_rollup(*, now: datetime | None = None) -> dict[str, int]:
    """Minutes from the newest one rolled up on, or from the earliest minute an ingest
    rewrote since the last run (`SamplesRewritten`: the remote source re-pulls minutes
    late). Each coarser bucket is aggregated again only where it holds a finer one this run
    wrote (or changed), or where it was never written: a run that changes no minute of a
    closed hour leaves its hour and day alone."""
    now = now or db_now()
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLLUP_LOCK)
        if not cursor.fetchone()[0]:
            return {"minute": 0, "hour": 0, "day": 0, "skipped": True}
        cursor.execute(sql.REWRITTEN_TAKE)
        rewritten = cursor.fetchone()[0]
        counts: dict[str, int] = {}
        written: dict[str, datetime | None] = {}  # per bucket, the earliest one this run wrote
        newest = _newest(RollupBucket.MINUTE)
        first = newest
        if first is None:  # a first run: from the oldest sample
            first = GpuSample.objects.order_by("at").values_list("at", flat=True).first()
        since = _earliest(first, rewritten)
        counts["minute"], written[RollupBucket.MINUTE] = 0, None
        if since is not None:
            since = bucket_floor(since, RollupBucket.MINUTE)  # a minute is rolled whole
            threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
            # The samples come out of their window sorted per GPU, and a minute's are
            # grouped as they come (an incremental sort). The planner cannot count the
            # GPU-minutes of a union (each GPU's sample before `since` joins the range's),
            # guesses 40,000 and would hash them: at 100,000 GPUs an hour's catch-up has
            # 6 million, and the hash spilled to disk for a third longer.
            cursor.execute("SET LOCAL enable_hashagg = off")
            minutes: dict[str, Any] = {  # Any: the stubs' parameter types leave out timedelta
                "bucket": RollupBucket.MINUTE, "step": STEP[RollupBucket.MINUTE],
                "since": since, "newest": newest, "now": now, "threshold": threshold,
            }  # fmt: skip
            cursor.execute(sql.ROLLUP_MINUTES, minutes)
            counts["minute"], written[RollupBucket.MINUTE] = cursor.fetchone()
            cursor.execute("RESET enable_hashagg")
        for bucket, source, start in COARSER:
            # The buckets after the newest one (never written yet; from the first source
            # bucket on a first run), and those holding a source bucket written now.
            last = _newest(bucket)
            pending = last + STEP[bucket] if last is not None else _oldest(source)
            since = _earliest(pending, written[source])
            counts[bucket], written[bucket] = 0, None
            if since is not None and start(since) < bucket_floor(now, bucket):
                coarser: dict[str, Any] = {  # Any: as `minutes` above
                    "bucket": bucket, "source": source, "step": STEP[bucket],
                    "since": start(since), "now": now,
                }  # fmt: skip
                cursor.execute(sql.ROLLUP_COARSER, coarser)
                counts[bucket], written[bucket] = cursor.fetchone()
    counts.update(fleet_rollups_refresh(rewritten=rewritten, written=written))
    return counts


_FLEET_BUCKETS = (RollupBucket.MINUTE, RollupBucket.HOUR, RollupBucket.DAY)


@transaction.atomic
def fleet_rollups_refresh(
    *, rewritten: datetime | None = None, written: dict[str, datetime | None] | None = None
) -> dict[str, int]:
    """Bring the per model and region rollups (minute, hour, day) up to the GPU rollups.
    With `written` (the rollup run: per bucket, the earliest GPU rollup it wrote, None:
    none), each from the bucket after their newest one, or from the earliest written where
    that is earlier. Without it (whatever writes GPU rollups itself, the demo): from the
    newest bucket they hold (GPU rollups rewrite their newest bucket too), or from
    `rewritten` where that is earlier, or, on a first run, the oldest GPU rollup."""
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    counts = {}
    with connection.cursor() as cursor:
        for bucket in _FLEET_BUCKETS:
            counts[f"fleet_{bucket}"] = 0
            last = FleetRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()  # fmt: skip
            if written is not None and last is not None:
                since = _earliest(last + STEP[bucket], written[bucket])
                newest_gpu = _newest(bucket)
                if newest_gpu is None or since > newest_gpu:
                    continue  # nothing new below
            else:
                since = last or _oldest(bucket)
                if since is not None and rewritten is not None:
                    since = min(since, bucket_floor(rewritten, bucket))
            if since is None:
                continue
            FleetRollup.objects.filter(bucket=bucket, at__gte=since).delete()
            cursor.execute(
                sql.FLEET_ROLLUP, {"bucket": bucket, "since": since, "threshold": threshold}
            )
            counts[f"fleet_{bucket}"] = cursor.rowcount
    return counts


def telemetry_prune(*, now: datetime | None = None) -> dict:
    now = now or db_now()
    conf = settings.ANCHORGPU
    raw_cutoff = now - conf["RAW_RETENTION"]
    samples = samples_prune(before=raw_cutoff)
    polls, _ = Poll.objects.filter(at__lt=raw_cutoff).delete()
    # Per bucket, so each is a range of the (bucket, at) index: `at` alone is no index's
    # first column, and the rows past the retention were found by reading the whole table
    # (docs/operations.md has the figures at 100,000 GPUs).
    cutoff = {"bucket__in": RollupBucket.values, "at__lt": now - conf["ROLLUP_RETENTION"]}
    rollups, _ = GpuRollup.objects.filter(**cutoff).delete()
    FleetRollup.objects.filter(**cutoff).delete()
    return {**samples, "polls": polls, "rollups": rollups}


@transaction.atomic
def rollups_copy(rows) -> None:
    """Write rollup rows (tuples in `sql.ROLLUP_COLUMNS`' order) with COPY."""
    with connection.cursor() as cursor, cursor.cursor.copy(sql.ROLLUPS_COPY) as copy:
        for row in rows:
            copy.write_row(row)
