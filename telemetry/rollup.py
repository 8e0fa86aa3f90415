"""Per-minute, per-hour and per-day rollups of the raw samples, and retention.

Each run recomputes from the last bucket it wrote, so a run after an outage catches up and
a repeated run rewrites the same rows (ON CONFLICT … DO UPDATE): idempotent.
"""

from datetime import datetime, timedelta

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


def _since(bucket, source_model, source_filter=None, *, newest=None):
    last = newest if newest is not None else _newest(bucket)
    if last is not None:
        return last
    source = source_model.objects.all()
    if source_filter:
        source = source.filter(**source_filter)
    return source.order_by("at").values_list("at", flat=True).first()


# Hours from minutes, days from hours: each from the start of the first unrolled bucket.
COARSER = (
    (RollupBucket.HOUR, RollupBucket.MINUTE, lambda at: at.replace(minute=0, second=0, microsecond=0)),
    (RollupBucket.DAY, RollupBucket.HOUR, lambda at: at.replace(hour=0, minute=0, second=0, microsecond=0)),
)  # fmt: skip


BUCKET_START = {bucket: start for bucket, _source, start in COARSER}

# Each bucket's length: `date_bin` by it from midnight UTC is its start (sql._BUCKET_OF_AT).
STEP = {
    RollupBucket.MINUTE: timedelta(minutes=1),
    RollupBucket.HOUR: timedelta(hours=1),
    RollupBucket.DAY: timedelta(days=1),
}


def _earliest(*ats):
    present = [at for at in ats if at is not None]
    return min(present) if present else None


@transaction.atomic
def telemetry_rollup(*, now: datetime | None = None) -> dict:
    """Each level from its newest bucket on, or from the earliest minute an ingest rewrote
    since the last run (`SamplesRewritten`: the remote source re-pulls minutes late)."""
    now = now or db_now()
    with connection.cursor() as cursor:
        cursor.execute(sql.ROLLUP_LOCK)
        if not cursor.fetchone()[0]:
            return {"minute": 0, "hour": 0, "day": 0, "skipped": True}
        cursor.execute(sql.REWRITTEN_TAKE)
        rewritten = cursor.fetchone()[0]
        counts = {}
        newest = _newest(RollupBucket.MINUTE)
        since = _earliest(_since("minute", GpuSample, newest=newest), rewritten)
        counts["minute"] = 0
        if since is not None:
            threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
            cursor.execute(
                sql.ROLLUP_MINUTES,
                {"bucket": RollupBucket.MINUTE, "step": STEP[RollupBucket.MINUTE],
                 "since": since, "newest": newest, "now": now, "threshold": threshold},
            )  # fmt: skip
            counts["minute"] = cursor.fetchone()[0]
        for bucket, source, start in COARSER:
            since = _earliest(_since(bucket, GpuRollup, {"bucket": source}), rewritten)
            counts[bucket] = 0
            if since is not None:
                cursor.execute(
                    sql.ROLLUP_COARSER,
                    {"bucket": bucket, "source": source, "step": STEP[bucket],
                     "since": start(since), "now": now},
                )  # fmt: skip
                counts[bucket] = cursor.rowcount
    counts.update(fleet_rollups_refresh(rewritten=rewritten))
    return counts


@transaction.atomic
def fleet_rollups_refresh(*, rewritten: datetime | None = None) -> dict:
    """Bring the per model and region rollups up to the GPU rollups, from the newest bucket
    they hold (rewritten: GPU rollups rewrite their newest bucket too), or from `rewritten`
    where that is earlier, or, on a first run, the oldest GPU rollup. Also called by
    whatever writes GPU rollups itself (the demo)."""
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    counts = {}
    with connection.cursor() as cursor:
        for bucket in (GpuRollup.Bucket.HOUR, GpuRollup.Bucket.DAY):
            since = (
                FleetRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()
                or GpuRollup.objects.filter(bucket=bucket).order_by("at").values_list("at", flat=True).first()
            )  # fmt: skip
            if since is not None and rewritten is not None:
                since = min(since, BUCKET_START[bucket](rewritten))
            counts[f"fleet_{bucket}"] = 0
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
    rollups, _ = GpuRollup.objects.filter(at__lt=now - conf["ROLLUP_RETENTION"]).delete()
    FleetRollup.objects.filter(at__lt=now - conf["ROLLUP_RETENTION"]).delete()
    return {**samples, "polls": polls, "rollups": rollups}


@transaction.atomic
def rollups_copy(rows) -> None:
    """Write rollup rows (tuples in `sql.ROLLUP_COLUMNS`' order) with COPY."""
    with connection.cursor() as cursor, cursor.cursor.copy(sql.ROLLUPS_COPY) as copy:
        for row in rows:
            copy.write_row(row)
