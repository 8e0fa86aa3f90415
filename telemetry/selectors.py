"""Reads of telemetry: series of GPUs over a time range, at the resolution the range needs."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, SupportsFloat, TypeVar
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone

from catalog.models import Gpu, Node, NodeState
from core.db import read_rows, reads_cursor
from telemetry import sql
from telemetry.engine_series import engine_gpu_series, engine_series_response
from telemetry.models import Flag, FlagKind, GpuSample, RollupBucket, Severity

EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

RAW_MAX_SPAN = timedelta(hours=6)
MINUTE_MAX_SPAN = timedelta(days=7)
ENGINE_STEP = timedelta(minutes=1)

N = TypeVar("N", int, float)
Part = tuple[str, datetime, datetime]  # (source: "raw" or a rollup bucket, from, to)
Source = str  # "gpu": GPU hours and days; "fleet": the fleet rollups
Level = tuple[str, timedelta, datetime | None]  # (bucket, its unit, end of its newest rollup)


_RAW_COLUMNS = ("gpu_id", "at", "utilization", "memory_used_mib", "memory_total_mib",
                "power_w", "temperature_c")  # fmt: skip


def _tuples(statement: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with reads_cursor() as cursor:
        cursor.execute(statement, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def _raw_rows(*, gpu_ids: list[int], start: datetime, end: datetime) -> list[tuple[Any, ...]]:
    raw = GpuSample.objects.filter(gpu_id__in=gpu_ids, at__gte=start, at__lte=end)
    return list(raw.order_by("at").values_list(*_RAW_COLUMNS))


def _minute_rows(*, gpu_ids: list[int], start: datetime, end: datetime) -> list[tuple[Any, ...]]:
    """Minute points of [start, end): computed from the raw samples (no minute is stored).
    The operator's engine's minutes, where it is the source, are chosen before (`gpu_series`)."""
    return _tuples(sql.MINUTE_POINTS, {"gpu_ids": gpu_ids, "start": start, "end": end})


def _hour_rows(*, gpu_ids: list[int], start: datetime, end: datetime) -> list[tuple[Any, ...]]:
    return _tuples(sql.HOUR_POINTS, {"gpu_ids": gpu_ids, "start": start, "end": end})


def gpu_series(
    *,
    gpus: list[Gpu],
    start: datetime,
    end: datetime,
    engine: bool = True,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Per-GPU series for the charts: raw samples up to RAW_MAX_SPAN; up to MINUTE_MAX_SPAN,
    minute points while the range's raw samples are kept (RAW_RETENTION); otherwise hourly
    points from GPU hours, then minute points after the newest closed hour, so the line
    reaches now. `source` says which ("raw", "minute" or "hour", which the page says). With
    the operator's engine as the source, its minutes where raw samples do not serve the
    range (`source`: engine); where it gives none, the database's points and
    `engine_fallback` saying why (telemetry/engine_series.py)."""
    by_pk = {gpu.pk: gpu for gpu in gpus}
    ids = list(by_pk)
    span = end - start
    fallback = None
    raw_kept_from = (now or timezone.now()) - settings.ANCHORGPU["RAW_RETENTION"]
    if engine and _engine_minutes_wanted(start=start, end=end, raw_kept_from=raw_kept_from):
        found = engine_gpu_series(gpus=gpus, start=start, end=end, step=ENGINE_STEP)
        if found.points is not None and found.since is not None:
            before = (  # the engine's first minutes are missing (its retention): ours
                gpu_series(gpus=gpus, start=start, end=found.since, engine=False, now=now)
                if found.since >= start + ENGINE_STEP
                else None
            )
            return engine_series_response(found, gpus=gpus, start=start, end=end, before=before)
        fallback = {"reason": found.reason}
    rows: list[tuple[Any, ...]]
    if span <= RAW_MAX_SPAN:
        source, rows = "raw", _raw_rows(gpu_ids=ids, start=start, end=end)
    elif span <= MINUTE_MAX_SPAN and start >= raw_kept_from:
        source, rows = "minute", _minute_rows(gpu_ids=ids, start=start, end=end)
    else:
        source = "hour"
        hours_until = min(end, max(start, rolled_until("hour") or start))
        rows = _hour_rows(gpu_ids=ids, start=start, end=hours_until)
        if hours_until < end:
            rows += _minute_rows(gpu_ids=ids, start=hours_until, end=end)
    series: dict[int, list[dict[str, Any]]] = {gpu_id: [] for gpu_id in by_pk}
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
            {"uuid": by_pk[g].uuid, "index": by_pk[g].index, "points": series[g]}
            for g in sorted(by_pk, key=lambda g: by_pk[g].index)
        ],
        **({"engine_fallback": fallback} if fallback else {}),
    }


def _engine_minutes_wanted(*, start: datetime, end: datetime, raw_kept_from: datetime) -> bool:
    """With TELEMETRY_SOURCE=prometheus the engine's minutes draw what raw samples do not:
    a range longer than raw points are drawn for, or one older than PostgreSQL keeps raw
    samples; up to a week of minutes (longer ranges read the hourly rows)."""
    if settings.ANCHORGPU["TELEMETRY_SOURCE"] != "prometheus" or end - start > MINUTE_MAX_SPAN:
        return False
    return end - start > RAW_MAX_SPAN or start < raw_kept_from


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

    def add(
        self,
        samples: int | None,
        util_sum: float | None,
        util_samples: int | None,
        util_max: float | None,
        mem_max: float | None,
        energy: SupportsFloat | None,
        covered: SupportsFloat | None,
        busy: SupportsFloat | None,
    ) -> None:
        """One part's figures (a row of `sql.part_totals`; None where it has none)."""
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


def _max(a: N | None, b: N | None) -> N | None:
    return b if a is None else a if b is None else max(a, b)


def _floor(at: datetime, unit: timedelta) -> datetime:
    return at - (at - EPOCH) % unit


def _ceil(at: datetime, unit: timedelta) -> datetime:
    floor = _floor(at, unit)
    return floor if floor == at else floor + unit


def rolled_until(bucket: str, source: Source = "gpu") -> datetime | None:
    """The end of the newest `bucket` rollup (GPU hours or days, or the fleet's): what
    comes after is only in finer data."""
    return _levels({bucket: source})[0][2]


_LEVELS = (
    ("day", timedelta(days=1)),
    ("hour", timedelta(hours=1)),
    ("minute", timedelta(minutes=1)),
)


def _plan(start: datetime, end: datetime, levels: list[Level]) -> list[Part]:
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


# GPUs have no minute level: what no hour holds is read from raw samples.
_GPU_LEVELS = {"day": "gpu", "hour": "gpu"}
_FLEET_LEVELS = {"day": "fleet", "hour": "fleet", "minute": "fleet"}


def _levels(sources: Mapping[str, Source] = _GPU_LEVELS) -> list[Level]:
    """[(bucket, unit, end of what it holds)], coarsest first, in one statement, for each
    bucket of `sources` read from the source given for it."""
    wanted = [(bucket, unit) for bucket, unit in _LEVELS if bucket in sources]
    levels = tuple((sources[bucket], bucket) for bucket, _ in wanted)
    params = [bucket for source, bucket in levels if source == "fleet"]
    with reads_cursor() as cursor:
        cursor.execute(sql.rolled_until(levels), params)
        ats = cursor.fetchone()
    return [(bucket, unit, at) for (bucket, unit), at in zip(wanted, ats, strict=True)]


def gpu_totals_by_gpu(
    *, start: datetime, end: datetime, gpu_ids: list[int] | None = None
) -> dict[int, Totals]:
    """Per GPU, what it did in [start, end), from the coarsest data that covers each part
    exactly (`_plan`): GPU days and hours, raw samples for the edges and the open hour. So
    a 30-day rental's whole hours count after raw samples are pruned, a 90-day dashboard
    reads daily rows, and the newest minute counts too."""
    totals: dict[int, Totals] = {}
    if end <= start:
        return totals
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    with reads_cursor() as cursor:
        for kind, a, b in _plan(start, end, _levels()):
            params = {"start": a, "end": b, "gpu_ids": gpu_ids}
            statement = sql.part_totals(kind, by_gpus=gpu_ids is not None)
            cursor.execute(statement, {**params, "threshold": threshold})
            for gpu_id, *row in cursor.fetchall():
                totals.setdefault(gpu_id, Totals()).add(*row)
    return totals


def busy_gpus(*, start: datetime, end: datetime) -> int:
    """How many GPUs averaged over the active threshold in [start, end), from the same
    parts as `gpu_totals_by_gpu`, counted by the database (one number, not a row per GPU)."""
    if end <= start:
        return 0
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    plan = _plan(start, end, _levels())
    params = sql.numbered_params({"start": a, "end": b, "bucket": kind} for kind, a, b in plan)
    with reads_cursor() as cursor:
        cursor.execute(
            sql.busy_gpus(tuple(kind for kind, _a, _b in plan)),
            {**params, "threshold": threshold},
        )
        busy: int = cursor.fetchone()[0]
        return busy


def fleet_totals_by_group(*, start: datetime, end: datetime) -> dict[tuple[int, int], Totals]:
    """Per (GPU model id, region id), what the fleet did in [start, end): whole days,
    hours and minutes from the fleet rollups (a few rows per bucket), the seconds at the
    edges and the newest part from raw samples, as `gpu_totals_by_gpu` reads them; every
    part in one statement. Peaks are not summed up per group, so `util_max` and
    `memory_max_mib` are unset."""
    totals: dict[tuple[int, int], Totals] = {}
    if end <= start:
        return totals
    levels = _levels(_FLEET_LEVELS)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    plan = _plan(start, end, levels)
    params = sql.numbered_params({"start": a, "end": b, "bucket": kind} for kind, a, b in plan)
    statement = sql.fleet_totals_by_group(
        tuple(kind for kind, _a, _b in plan), fleet_rolled=frozenset(("day", "hour", "minute"))
    )
    with reads_cursor() as cursor:
        cursor.execute(statement, {**params, "threshold": threshold})
        for model_id, region_id, *row in cursor.fetchall():
            totals.setdefault((model_id, region_id), Totals()).add(*row)
    return totals


def fleet_totals_rolled(
    *, start: datetime, end: datetime
) -> tuple[dict[tuple[int, int], Totals], tuple[datetime, datetime] | None]:
    """`fleet_totals_by_group` from the fleet rollups alone (a few rows per hour or day,
    whatever the fleet's size), with the span they cover: the whole hours and days of
    [start, end) that are rolled up, the newest rolled hour at most. The edges no fleet
    rollup holds (the part of an hour at either end, the hours after the newest rollup) are
    left out, not guessed: the span says what the figures cover (None: nothing yet)."""
    totals: dict[tuple[int, int], Totals] = {}
    levels = _levels({"day": "fleet", "hour": "fleet"})
    plan = [part for part in _plan(start, end, levels) if part[0] != "raw"]
    if not plan:
        return totals, None
    params = sql.numbered_params({"start": a, "end": b, "bucket": kind} for kind, a, b in plan)
    statement = sql.fleet_totals_by_group(
        tuple(kind for kind, _a, _b in plan), fleet_rolled=frozenset(("day", "hour"))
    )
    with reads_cursor() as cursor:
        cursor.execute(statement, params)
        for model_id, region_id, *row in cursor.fetchall():
            totals.setdefault((model_id, region_id), Totals()).add(*row)
    return totals, (plan[0][1], plan[-1][2])


def fleet_busy_by_bucket(*, bucket: str, start: datetime, end: datetime) -> dict[datetime, int]:
    """GPUs busy (average utilisation over the threshold) per rolled-up hour or day."""
    with reads_cursor() as cursor:
        cursor.execute(sql.FLEET_BUSY_BY_BUCKET, {"bucket": bucket, "start": start, "end": end})
        return dict(cursor.fetchall())


@dataclass(frozen=True)
class FleetMinute:
    """One minute of the fleet as rolled up: GPUs that reported in it, GPUs busy in it
    (their minute's average utilisation over the active threshold), and the minute's end."""

    until: datetime
    busy: int
    reporting: int


def fleet_newest_minute(*, start: datetime, end: datetime) -> FleetMinute | None:
    """The newest minute in [start, end) the fleet rollups hold (None: none): a few rows
    whatever the fleet's size, never raw samples."""
    params: dict[str, str | datetime] = {
        "bucket": RollupBucket.MINUTE,
        "start": start,
        "end": end,
    }
    with reads_cursor() as cursor:
        cursor.execute(sql.FLEET_NEWEST_MINUTE, params)
        row = cursor.fetchone()
    if row is None:
        return None
    at, busy, reporting = row
    return FleetMinute(until=at + timedelta(minutes=1), busy=busy, reporting=reporting)


def gpu_totals(*, start: datetime, end: datetime, gpu_ids: list[int]) -> Totals:
    """`gpu_totals_by_gpu` summed over the GPUs."""
    total = Totals()
    for one in gpu_totals_by_gpu(start=start, end=end, gpu_ids=gpu_ids).values():
        total.add(
            one.samples, one.util_sum, one.util_samples, one.util_max, one.memory_max_mib,
            one.energy_j, one.covered_s, one.busy_s,
        )  # fmt: skip
    return total


def raw_samples_from(*, now: datetime) -> datetime:
    """Raw samples are all kept from here on: the older of the oldest one kept and the raw
    retention's cutoff (samples begin after it where polling began later; the prune may not
    have reached it yet). A part of a range before it can no longer be read from raw
    samples, so GPU hours cannot split its hour."""
    oldest = GpuSample.objects.order_by("at").values_list("at", flat=True).first()
    cutoff: datetime = now - settings.ANCHORGPU["RAW_RETENTION"]
    return min(oldest, cutoff) if oldest is not None else cutoff


def memory_total_by_model(*, since: datetime) -> dict[int, float]:
    """Per GPU model id, the largest memory total its GPUs' hours since `since` report."""
    with reads_cursor() as cursor:
        cursor.execute(sql.MEMORY_TOTAL_BY_MODEL, {"since": since})
        return dict(cursor.fetchall())


def fleet_sizes(
    *, start: datetime, end: datetime, step: timedelta
) -> dict[datetime, tuple[int, int]]:
    """Per hour or day, from what the polling rounds recorded: the fleet's size (the
    largest in the step) and the GPUs whose telemetry answered (the fewest in a round). A
    step with no record is missing, not guessed from today's fleet."""
    unit = {timedelta(hours=1): "hour", timedelta(days=1): "day"}[step]
    with reads_cursor() as cursor:
        cursor.execute(sql.FLEET_SIZES, {"unit": unit, "start": start, "end": end})
        return {at: (gpus, reporting) for at, gpus, reporting in cursor.fetchall()}


def flag_list(
    *,
    state: str = "open",
    kind: str | None = None,
    severity: str | None = None,
    node: str | None = None,
) -> QuerySet[Flag]:
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


def open_flag_rows(*, limit: int) -> list[dict[str, Any]]:
    """The newest open flags as plain rows (node hostname, GPU index where the flag is on
    one, kind and severity with their labels), for dashboards that keep them a minute."""
    rows = read_rows(sql.OPEN_FLAGS, {"limit": limit})
    for row in rows:
        row["kind_label"] = FlagKind(row["kind"]).label
        row["severity_label"] = Severity(row["severity"]).label
    return rows


def prometheus_targets() -> list[dict[str, Any]]:
    """The active nodes as `http_sd_configs` target groups, one per node: `__address__` from
    its exporter URL, the path (and scheme) beside it, so one port can be many nodes; labels
    name the node, its model and region (PROMETHEUS_NODE_LABEL carries the hostname)."""
    node_label = settings.ANCHORGPU["PROMETHEUS"]["NODE_LABEL"]
    groups: list[dict[str, Any]] = []
    for hostname, url, model, region in (
        Node.objects.filter(state=NodeState.ACTIVE)
        .order_by("hostname")
        .values_list("hostname", "telemetry_url", "gpu_model__slug", "region__slug")
    ):
        parts = urlsplit(url)
        labels = {
            "__metrics_path__": parts.path or "/metrics",
            "__scheme__": parts.scheme,
            "instance": hostname,
            node_label: hostname,
            "anchorgpu_model": model,
            "anchorgpu_region": region,
        }
        for name, values in parse_qs(parts.query).items():
            labels[f"__param_{name}"] = values[0]
        groups.append({"targets": [parts.netloc], "labels": labels})
    return groups
