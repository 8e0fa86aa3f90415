"""Reads of telemetry: series of GPUs over a time range, at the resolution the range needs."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings

from catalog.models import Gpu
from core.db import read_rows, reads_cursor
from telemetry.models import Flag, FlagKind, FleetRollup, GpuRollup, GpuSample, Severity
from telemetry.rollup import samples_with_deltas

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

RAW_MAX_SPAN = timedelta(hours=6)
MINUTE_MAX_SPAN = timedelta(days=7)


_RAW_COLUMNS = ("gpu_id", "at", "utilization", "memory_used_mib", "memory_total_mib",
                "power_w", "temperature_c")  # fmt: skip
_ROLLUP_COLUMNS = ("gpu_id", "at", "utilization_avg", "memory_used_max_mib", "memory_total_mib",
                   "power_avg_w", "temperature_max_c")  # fmt: skip


def gpu_series(*, gpus: list[Gpu], start: datetime, end: datetime) -> dict:
    """Per-GPU series for the charts: raw samples for short ranges, rollups for long ones,
    and, after the newest rollup, the finer data that is not rolled up yet, so the line
    reaches now."""
    gpus = {gpu.pk: gpu for gpu in gpus}
    span = end - start
    if span <= RAW_MAX_SPAN:
        source, parts = "raw", [("raw", start, end)]
    else:
        source = GpuRollup.Bucket.MINUTE if span <= MINUTE_MAX_SPAN else GpuRollup.Bucket.HOUR
        # The finer rollups may not reach back to `start` (a backfilled demo, a shorter
        # retention): hourly ones fill in before the first minute rollup.
        first_minute = (
            GpuRollup.objects.filter(bucket="minute", gpu_id__in=gpus, at__gte=start, at__lt=end)
            .order_by("at")
            .values_list("at", flat=True)
            .first()
        )
        hours_until = min(end, rolled_until("hour") or start)
        if source == GpuRollup.Bucket.MINUTE:
            hours_until = min(hours_until, first_minute or hours_until)
        parts, minutes_from = [("hour", start, hours_until)], max(start, hours_until)
        minutes_until = min(end, rolled_until("minute") or minutes_from)
        parts += [
            ("minute", minutes_from, minutes_until),
            ("raw", max(minutes_from, minutes_until), end),
        ]
    series = {gpu_id: [] for gpu_id in gpus}
    for kind, a, b in parts:
        if b <= a:
            continue
        if kind == "raw":
            rows = GpuSample.objects.filter(gpu_id__in=gpus, at__gte=a, at__lte=b)
            rows = rows.order_by("at").values_list(*_RAW_COLUMNS)
        else:
            rows = GpuRollup.objects.filter(gpu_id__in=gpus, bucket=kind, at__gte=a, at__lt=b)
            rows = rows.order_by("at").values_list(*_ROLLUP_COLUMNS)
        for gpu_id, at, util, mem, mem_total, power, temp in rows:
            series[gpu_id].append(
                {"t": at.isoformat(), "util": util, "mem": mem, "mem_total": mem_total,
                 "power": power, "temp": temp}
            )  # fmt: skip
    return {
        "from": start.isoformat(),
        "to": end.isoformat(),
        "source": source,
        "gpus": [
            {"uuid": gpus[g].uuid, "index": gpus[g].index, "points": series[g]}
            for g in sorted(gpus, key=lambda g: gpus[g].index)
        ],
    }


@dataclass
class Totals:
    """What GPUs did over a time range. `samples` count readings; times are in seconds."""

    samples: int = 0
    util_sum: float = 0.0  # utilisation × samples, for the average
    util_samples: int = 0
    util_max: float | None = None
    memory_max_mib: float | None = None
    energy_j: float | None = None
    covered_s: float = 0.0
    busy_s: float = 0.0

    def add(self, samples, util_sum, util_samples, util_max, mem_max, energy, covered, busy):
        energy, covered, busy = (None if v is None else float(v) for v in (energy, covered, busy))
        self.samples += samples or 0
        self.util_sum += util_sum or 0
        self.util_samples += util_samples or 0
        self.util_max = _max(self.util_max, util_max)
        self.memory_max_mib = _max(self.memory_max_mib, mem_max)
        if energy is not None:
            self.energy_j = (self.energy_j or 0.0) + energy
        self.covered_s += covered or 0
        self.busy_s += busy or 0

    @property
    def util_avg(self) -> float | None:
        return self.util_sum / self.util_samples if self.util_samples else None


def _max(a, b):
    return b if a is None else a if b is None else max(a, b)


_ROLLED = """
SELECT gpu_id, sum(samples), sum(utilization_avg * samples),
       sum(samples) FILTER (WHERE utilization_avg IS NOT NULL), max(utilization_max),
       max(memory_used_max_mib), sum(energy_j), sum(covered_s), sum(busy_s)
FROM telemetry_gpurollup
WHERE bucket = %(bucket)s AND at >= %(start)s AND at < %(end)s {gpus}
GROUP BY gpu_id
"""

_RAW = """
SELECT gpu_id, count(*), sum(utilization), count(utilization), max(utilization),
       max(memory_used_mib), sum(energy_rise), sum(covered),
       sum(covered) FILTER (WHERE utilization > %(threshold)s)
FROM d GROUP BY gpu_id
"""


def _floor(at: datetime, unit: timedelta) -> datetime:
    return at - (at - EPOCH) % unit


def _ceil(at: datetime, unit: timedelta) -> datetime:
    floor = _floor(at, unit)
    return floor if floor == at else floor + unit


def rolled_until(bucket: str, model=GpuRollup) -> datetime | None:
    """The end of the newest `bucket` rollup (of GPUs, or of the fleet): what comes after
    is only in finer data."""
    return _levels({bucket: model})[0][2]


_LEVELS = (
    ("day", timedelta(days=1)),
    ("hour", timedelta(hours=1)),
    ("minute", timedelta(minutes=1)),
)


def _plan(start, end, levels) -> list[tuple[str, datetime, datetime]]:
    """Split [start, end) into (source, from, to) parts: the whole buckets of the coarsest
    level that has them rolled up, then the edges on either side by the next level down,
    and raw samples for what no rollup covers (the edges' seconds, the newest part)."""
    if end <= start:
        return []
    if not levels:
        return [("raw", start, end)]
    (bucket, unit, rolled), finer = levels[0], levels[1:]
    a, b = _ceil(start, unit), min(_floor(end, unit), rolled or start)
    if b <= a:
        return _plan(start, end, finer)
    return [*_plan(start, a, finer), (bucket, a, b), *_plan(b, end, finer)]


# The columns of a `_part_query` row, named for queries that sum parts.
_PART_COLUMNS = (
    "(gpu_id, samples, util_sum, util_samples, util_max, mem_max, energy, covered, busy)"
)


def _part_query(kind: str, gpus: str) -> str:
    """Per GPU, the `Totals.add` columns of one part of a `_plan`."""
    if kind == "raw":
        return (
            samples_with_deltas(since="%(start)s::timestamptz", until="%(end)s", where=gpus) + _RAW
        )
    return _ROLLED.format(gpus=gpus)


_NEWEST = "(SELECT max(at) FROM {table} WHERE bucket = '{bucket}')"  # the (bucket, at) index

_GPU_LEVELS = {"day": GpuRollup, "hour": GpuRollup, "minute": GpuRollup}


def _levels(sources: dict = _GPU_LEVELS) -> list:
    """[(bucket, unit, end of its newest rollup)], coarsest first, in one statement, for
    each bucket of `sources` read from the rollup model given for it."""
    wanted = [(bucket, unit) for bucket, unit in _LEVELS if bucket in sources]
    newest = ", ".join(
        _NEWEST.format(table=sources[bucket]._meta.db_table, bucket=bucket) for bucket, _ in wanted
    )
    with reads_cursor() as cursor:
        cursor.execute(f"SELECT {newest}")
        ats = cursor.fetchone()
    return [
        (bucket, unit, at + unit if at else None)
        for (bucket, unit), at in zip(wanted, ats, strict=True)
    ]


def _union_all(parts: list[tuple[str, dict]]) -> tuple[str, dict]:
    """Statements with named parameters as one UNION ALL (one round trip): each part's
    parameters renamed with its position."""
    sqls, params = [], {}
    for i, (sql, own) in enumerate(parts):
        for name, value in own.items():
            sql = sql.replace(f"%({name})s", f"%({name}{i})s")
            params[f"{name}{i}"] = value
        sqls.append(f"({sql})")
    return " UNION ALL ".join(sqls), params


def gpu_totals_by_gpu(
    *, start: datetime, end: datetime, gpu_ids: list[int] | None = None
) -> dict[int, Totals]:
    """Per GPU, what it did in [start, end), from the coarsest data that covers each part
    exactly (`_plan`). So a 30-day rental's figures cover all 30 days after raw samples
    are pruned, a 90-day dashboard reads daily rows, and the newest minute counts too."""
    totals: dict[int, Totals] = {}
    if end <= start:
        return totals
    gpus = "AND gpu_id = ANY(%(gpu_ids)s)" if gpu_ids is not None else ""
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    with reads_cursor() as cursor:
        for kind, a, b in _plan(start, end, _levels()):
            params = {"start": a, "end": b, "gpu_ids": gpu_ids, "bucket": kind}
            cursor.execute(_part_query(kind, gpus), {**params, "threshold": threshold})
            for gpu_id, *row in cursor.fetchall():
                totals.setdefault(gpu_id, Totals()).add(*row)
    return totals


def busy_gpus(*, start: datetime, end: datetime) -> int:
    """How many GPUs averaged over the active threshold in [start, end), from the same
    parts as `gpu_totals_by_gpu`, counted by the database (one number, not a row per GPU)."""
    if end <= start:
        return 0
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    parts, params = _union_all(
        [
            (_part_query(kind, ""), {"start": a, "end": b, "bucket": kind, "threshold": threshold})
            for kind, a, b in _plan(start, end, _levels())
        ]
    )
    with reads_cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM ({parts}) AS t {_PART_COLUMNS} GROUP BY gpu_id"
            " HAVING sum(util_sum) / nullif(sum(util_samples), 0) > %(threshold)s) AS busy",
            {**params, "threshold": threshold},
        )
        return cursor.fetchone()[0]


_FLEET_ROLLED = """
SELECT gpu_model_id, region_id, sum(samples)::bigint, sum(util_sum), sum(util_samples)::bigint,
       NULL, NULL, sum(energy_j), sum(covered_s), sum(busy_s)
FROM telemetry_fleetrollup
WHERE bucket = %(bucket)s AND at >= %(start)s AND at < %(end)s
GROUP BY gpu_model_id, region_id
"""

_BY_GROUP = """
SELECT n.gpu_model_id, n.region_id, sum(t.samples)::bigint, sum(t.util_sum)::float8,
       sum(t.util_samples)::bigint,
       max(t.util_max), max(t.mem_max), sum(t.energy), sum(t.covered), sum(t.busy)
FROM ({part}) AS t {columns}
JOIN catalog_gpu g ON g.id = t.gpu_id
JOIN catalog_node n ON n.id = g.node_id
GROUP BY n.gpu_model_id, n.region_id
"""


def fleet_totals_by_group(*, start: datetime, end: datetime) -> dict[tuple[int, int], Totals]:
    """Per (GPU model id, region id), what the fleet did in [start, end): whole hours and
    days from the fleet rollups (a few rows per bucket), the edges and the newest part
    from the GPU rollups and raw samples, as `gpu_totals_by_gpu` reads them; every part in
    one statement. Peaks are not summed up per group, so `util_max` and `memory_max_mib`
    are unset."""
    totals: dict[tuple[int, int], Totals] = {}
    if end <= start:
        return totals
    levels = _levels({"day": FleetRollup, "hour": FleetRollup, "minute": GpuRollup})
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    parts, params = _union_all(
        [
            (
                _FLEET_ROLLED if kind in ("day", "hour")
                else _BY_GROUP.format(part=_part_query(kind, ""), columns=_PART_COLUMNS),
                {"start": a, "end": b, "bucket": kind, "threshold": threshold},
            )
            for kind, a, b in _plan(start, end, levels)
        ]
    )  # fmt: skip
    with reads_cursor() as cursor:
        cursor.execute(parts, params)
        for model_id, region_id, *row in cursor.fetchall():
            totals.setdefault((model_id, region_id), Totals()).add(*row)
    return totals


_BUSY_BY_BUCKET = """
SELECT at, sum(busy_gpus) FROM telemetry_fleetrollup
WHERE bucket = %(bucket)s AND at >= %(start)s AND at < %(end)s
GROUP BY at
"""


def fleet_busy_by_bucket(*, bucket: str, start: datetime, end: datetime) -> dict[datetime, int]:
    """GPUs busy (average utilisation over the threshold) per rolled-up hour or day."""
    with reads_cursor() as cursor:
        cursor.execute(_BUSY_BY_BUCKET, {"bucket": bucket, "start": start, "end": end})
        return dict(cursor.fetchall())


def gpu_totals(*, start: datetime, end: datetime, gpu_ids: list[int]) -> Totals:
    """`gpu_totals_by_gpu` summed over the GPUs."""
    total = Totals()
    for one in gpu_totals_by_gpu(start=start, end=end, gpu_ids=gpu_ids).values():
        total.add(
            one.samples, one.util_sum, one.util_samples, one.util_max, one.memory_max_mib,
            one.energy_j, one.covered_s, one.busy_s,
        )  # fmt: skip
    return total


_SIZES = """
SELECT date_trunc(%(unit)s, at), max(gpus), min(reporting) FROM telemetry_fleetsize
WHERE at >= %(start)s AND at <= %(end)s
GROUP BY 1
"""


def fleet_sizes(
    *, start: datetime, end: datetime, step: timedelta
) -> dict[datetime, tuple[int, int]]:
    """Per hour or day, from what the polling rounds recorded: the fleet's size (the
    largest in the step) and the GPUs whose telemetry answered (the fewest in a round). A
    step with no record is missing, not guessed from today's fleet."""
    unit = {timedelta(hours=1): "hour", timedelta(days=1): "day"}[step]
    with reads_cursor() as cursor:
        cursor.execute(_SIZES, {"unit": unit, "start": start, "end": end})
        return {at: (gpus, reporting) for at, gpus, reporting in cursor.fetchall()}


def flag_list(*, state: str = "open", kind=None, severity=None, node=None):
    """Flags newest first: open ones (what to look at), closed ones (the history) or all."""
    flags = Flag.objects.select_related("node", "gpu", "acknowledged_by").order_by(
        "-opened_at", "-id"
    )
    if state == "open":
        flags = flags.filter(closed_at__isnull=True)
    elif state == "closed":
        flags = flags.filter(closed_at__isnull=False)
    if kind:
        flags = flags.filter(kind=kind)
    if severity:
        flags = flags.filter(severity=severity)
    if node:
        flags = flags.filter(node__hostname=node)
    return flags


_OPEN_FLAGS = """
SELECT f.id, f.kind, f.severity, f.detail, f.opened_at, f.last_seen_at, f.acknowledged_at,
       n.hostname AS node, g.index AS gpu_index
FROM telemetry_flag f
JOIN catalog_node n ON n.id = f.node_id
LEFT JOIN catalog_gpu g ON g.id = f.gpu_id
WHERE f.closed_at IS NULL
ORDER BY f.opened_at DESC, f.id DESC
LIMIT %(limit)s
"""


def open_flag_rows(*, limit: int) -> list[dict]:
    """The newest open flags as plain rows (node hostname, GPU index where the flag is on
    one, kind and severity with their labels), for dashboards that keep them a minute."""
    rows = read_rows(_OPEN_FLAGS, {"limit": limit})
    for row in rows:
        row["kind_label"] = FlagKind(row["kind"]).label
        row["severity_label"] = Severity(row["severity"]).label
    return rows
