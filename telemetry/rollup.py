"""Per-minute, per-hour and per-day rollups of the raw samples, and retention.

Each run recomputes from the last bucket it wrote, so a run after an outage catches up and
a repeated run rewrites the same rows (ON CONFLICT … DO UPDATE): idempotent.
"""

from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from telemetry.models import FleetRollup, GpuRollup, GpuSample, Poll
from telemetry.partitions import samples_prune

_COLUMNS = (
    "samples = EXCLUDED.samples, utilization_avg = EXCLUDED.utilization_avg, "
    "utilization_max = EXCLUDED.utilization_max, memory_used_max_mib = EXCLUDED.memory_used_max_mib, "
    "memory_total_mib = EXCLUDED.memory_total_mib, power_avg_w = EXCLUDED.power_avg_w, "
    "temperature_max_c = EXCLUDED.temperature_max_c, energy_j = EXCLUDED.energy_j, "
    "covered_s = EXCLUDED.covered_s, busy_s = EXCLUDED.busy_s"
)

# Energy and time come from each sample and the one before it (looked for up to LOOKBACK
# before the range, so a bucket's first interval is not lost): the interval belongs to the
# later sample's minute. The energy counter's rise is its delta; a drop is a reset (the GPU
# or exporter restarted), and the rise since the reset is the new value itself, as
# Prometheus' increase() counts it. An interval longer than MAX_GAP covers no time (the GPU
# was not seen), though the energy counter still tells what was used across it.
LOOKBACK = "1 hour"
MAX_GAP_SECONDS = 300


def samples_with_deltas(*, since: str, until: str, where: str = "") -> str:
    """`WITH … d AS (…)`: the raw samples in [since, until) (SQL expressions), each with its
    `energy_rise` and `covered` seconds since the sample before it (looked for up to
    LOOKBACK earlier). The one definition of a counter's rise, for rollups and live reads."""
    return f"""
WITH s AS (
    SELECT gpu_id, at, utilization, memory_used_mib, memory_total_mib, power_w, temperature_c,
           energy_j, lag(energy_j) OVER w AS energy_before,
           extract(epoch FROM at - lag(at) OVER w)::float8 AS interval_s
    FROM telemetry_gpusample
    WHERE at >= {since} - interval '{LOOKBACK}' AND at < {until} {where}
    WINDOW w AS (PARTITION BY gpu_id ORDER BY at)
), d AS (
    SELECT *,
           CASE WHEN energy_j >= energy_before THEN energy_j - energy_before
                WHEN energy_j < energy_before THEN energy_j END AS energy_rise,
           CASE WHEN interval_s <= {MAX_GAP_SECONDS} THEN interval_s END AS covered
    FROM s WHERE at >= {since}
)
"""


_MINUTES = (
    samples_with_deltas(
        since="%(since)s::timestamptz", until="date_trunc('minute', %(now)s::timestamptz)"
    )
    + f"""
INSERT INTO telemetry_gpurollup (gpu_id, bucket, at, samples, utilization_avg, utilization_max,
    memory_used_max_mib, memory_total_mib, power_avg_w, temperature_max_c, energy_j, covered_s,
    busy_s)
SELECT gpu_id, 'minute', date_trunc('minute', at), count(*), avg(utilization), max(utilization),
    max(memory_used_mib), max(memory_total_mib), avg(power_w), max(temperature_c),
    sum(energy_rise), sum(covered),
    sum(covered) FILTER (WHERE utilization > %(threshold)s)
FROM d
GROUP BY gpu_id, date_trunc('minute', at)
ON CONFLICT (gpu_id, bucket, at) DO UPDATE SET {_COLUMNS}
"""
)


def _coarser(target: str, source: str) -> str:
    """Roll `source` buckets up into `target` buckets (minute → hour, hour → day)."""
    return f"""
INSERT INTO telemetry_gpurollup (gpu_id, bucket, at, samples, utilization_avg, utilization_max,
    memory_used_max_mib, memory_total_mib, power_avg_w, temperature_max_c, energy_j, covered_s,
    busy_s)
SELECT gpu_id, '{target}', date_trunc('{target}', at), sum(samples),
    sum(utilization_avg * samples) / nullif(sum(samples) FILTER (WHERE utilization_avg IS NOT NULL), 0),
    max(utilization_max), max(memory_used_max_mib), max(memory_total_mib), avg(power_avg_w),
    max(temperature_max_c), sum(energy_j), sum(covered_s), sum(busy_s)
FROM telemetry_gpurollup
WHERE bucket = '{source}' AND at >= %(since)s AND at < date_trunc('{target}', %(now)s::timestamptz)
GROUP BY gpu_id, date_trunc('{target}', at)
ON CONFLICT (gpu_id, bucket, at) DO UPDATE SET {_COLUMNS}
"""


_HOURS = _coarser("hour", "minute")
_DAYS = _coarser("day", "hour")

# Sums of the GPU rollups per model and region; the figures add up exactly as the per-GPU
# reads add them (`telemetry.selectors.Totals`), so either source gives the same answer.
_FLEET = """
INSERT INTO telemetry_fleetrollup (bucket, at, gpu_model_id, region_id, gpus, busy_gpus, samples,
    util_sum, util_samples, covered_s, busy_s, energy_j)
SELECT r.bucket, r.at, n.gpu_model_id, n.region_id, count(*),
    count(*) FILTER (WHERE r.utilization_avg > %(threshold)s), sum(r.samples),
    coalesce(sum(r.utilization_avg * r.samples), 0),
    coalesce(sum(r.samples) FILTER (WHERE r.utilization_avg IS NOT NULL), 0),
    coalesce(sum(r.covered_s), 0), coalesce(sum(r.busy_s), 0), sum(r.energy_j)
FROM telemetry_gpurollup r
JOIN catalog_gpu g ON g.id = r.gpu_id
JOIN catalog_node n ON n.id = g.node_id
WHERE r.bucket = %(bucket)s AND r.at >= %(since)s
GROUP BY r.bucket, r.at, n.gpu_model_id, n.region_id
"""


def _since(bucket, source_model, source_filter=None):
    last = (
        GpuRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()
    )
    if last is not None:
        return last
    source = source_model.objects.all()
    if source_filter:
        source = source.filter(**source_filter)
    return source.order_by("at").values_list("at", flat=True).first()


@transaction.atomic
def telemetry_rollup(*, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(hashtextextended('telemetry_rollup', 0))")
        if not cursor.fetchone()[0]:
            return {"minute": 0, "hour": 0, "day": 0, "skipped": True}
        counts = {}
        since = _since("minute", GpuSample)
        counts["minute"] = 0
        if since is not None:
            threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
            cursor.execute(_MINUTES, {"since": since, "now": now, "threshold": threshold})
            counts["minute"] = cursor.rowcount
        since = _since("hour", GpuRollup, {"bucket": "minute"})
        counts["hour"] = 0
        if since is not None:
            cursor.execute(
                _HOURS, {"since": since.replace(minute=0, second=0, microsecond=0), "now": now}
            )
            counts["hour"] = cursor.rowcount
        since = _since("day", GpuRollup, {"bucket": "hour"})
        counts["day"] = 0
        if since is not None:
            cursor.execute(
                _DAYS,
                {"since": since.replace(hour=0, minute=0, second=0, microsecond=0), "now": now},
            )
            counts["day"] = cursor.rowcount
    counts.update(fleet_rollups_refresh())
    return counts


@transaction.atomic
def fleet_rollups_refresh() -> dict:
    """Bring the per model and region rollups up to the GPU rollups, from the newest bucket
    they hold (rewritten: GPU rollups rewrite their newest bucket too) or, on a first run,
    the oldest GPU rollup. Also called by whatever writes GPU rollups itself (the demo)."""
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    counts = {}
    with connection.cursor() as cursor:
        for bucket in (GpuRollup.Bucket.HOUR, GpuRollup.Bucket.DAY):
            since = (
                FleetRollup.objects.filter(bucket=bucket).order_by("-at").values_list("at", flat=True).first()
                or GpuRollup.objects.filter(bucket=bucket).order_by("at").values_list("at", flat=True).first()
            )  # fmt: skip
            counts[f"fleet_{bucket}"] = 0
            if since is None:
                continue
            FleetRollup.objects.filter(bucket=bucket, at__gte=since).delete()
            cursor.execute(_FLEET, {"bucket": bucket, "since": since, "threshold": threshold})
            counts[f"fleet_{bucket}"] = cursor.rowcount
    return counts


def telemetry_prune(*, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    conf = settings.ANCHORGPU
    raw_cutoff = now - conf["RAW_RETENTION"]
    samples = samples_prune(before=raw_cutoff)
    polls, _ = Poll.objects.filter(at__lt=raw_cutoff).delete()
    rollups, _ = GpuRollup.objects.filter(at__lt=now - conf["ROLLUP_RETENTION"]).delete()
    FleetRollup.objects.filter(at__lt=now - conf["ROLLUP_RETENTION"]).delete()
    return {**samples, "polls": polls, "rollups": rollups}
