"""The fleet report, the staff's page of the fleet: its use over time, by model and
region, money, health.

It joins allocations and the ledger (rentals) with rollups and flags (telemetry). Up to a
week it reads hourly rollups; longer ranges read daily ones.
"""

from collections import defaultdict
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.conf import settings
from django.core.cache import cache
from django.db.models import Min
from django.utils import timezone
from django.utils.translation import get_language

from catalog.models import NodeHealth, NodeState
from core.dates import DAY_US
from core.db import read_rows, reads_cursor, reporting_reads
from core.money import quantize
from core.words import in_language
from rentals.models import AllocationState, LedgerKind, impaired_minimum
from rentals.selectors.summary import booked_ahead_summary
from reports import sql
from reports.models import AllocatedStep, Step
from telemetry.models import FleetSize, RollupBucket
from telemetry.rollup import STEP, bucket_floor
from telemetry.selectors import (
    fleet_busy_by_bucket,
    fleet_newest_minute,
    fleet_sizes,
    fleet_totals_by_group,
    fleet_totals_rolled,
    open_flag_rows,
    rolled_until,
)

_STARTED = [AllocationState.RUNNING, AllocationState.STOPPED]
# The states an allocation may be in once it has been stopped (all but scheduled).
_STOPPABLE = [*_STARTED, AllocationState.EXPIRED, AllocationState.CANCELLED]

# How far back "busy now" looks for the newest minute rolled up: older is not "now".
BUSY_NOW_WITHIN = timedelta(minutes=5)


def _allocation_rows(which: str, **params: Any) -> list[dict[str, Any]]:
    return read_rows(sql.allocation_rows(which), params)


def _parsed(at: str | None) -> datetime | None:
    return datetime.fromisoformat(at) if at else None


def _step_of(bucket: str) -> timedelta:
    """The length of a `Step` (the rollups' bucket of the same name)."""
    return STEP[RollupBucket(bucket)]


def step_for(days: float) -> timedelta:
    """Hours up to a week, days beyond: 90 days costs about what 4 days of hours do."""
    return timedelta(hours=1) if days <= 7 else timedelta(days=1)


def bucket_of(step: timedelta) -> str:
    return Step.HOUR if step == timedelta(hours=1) else Step.DAY


@reporting_reads()
def fleet_over_time(
    *, start: datetime, end: datetime, step: timedelta, counted: dict[datetime, int] | None = None
) -> list[dict[str, Any]]:
    """Per step: the fleet's size as recorded then and the fewest of its GPUs whose
    telemetry answered a round (both None where nothing was recorded), GPUs allocated, and
    GPUs busy (average utilisation over the threshold, so at most those answering); all
    four None in a step before the fleet's first record with nothing in it (a gap). A step
    the rollups have not closed yet (the current one) is read from the fleet's minute
    rollups, never raw samples: its busy GPUs are those busy in its newest rolled-up minute,
    whose end is its `busy_until` (busy None, and busy_until None: no minute of it is rolled
    up yet). `counted`: GPUs allocated in the last step, where the caller has counted them
    (`allocated_per_step`)."""
    bucket = bucket_of(step)
    allocated = allocated_per_step(bucket=bucket, start=start, end=end, counted=counted)
    busy: dict[datetime, int | None] = dict(
        fleet_busy_by_bucket(bucket=bucket, start=min(allocated, default=start), end=end)
    )
    rolled = rolled_until(bucket, "fleet") or start
    as_of: dict[datetime, str | None] = {}
    for h in allocated:
        if h + step > rolled:
            minute = fleet_newest_minute(start=max(h, start), end=min(h + step, end))
            busy[h] = minute.busy if minute else None
            as_of[h] = minute.until.isoformat() if minute else None
    sizes = fleet_sizes(start=min(allocated, default=start), end=end, step=step)
    began = FleetSize.objects.aggregate(first=Min("at"))["first"]  # the first record ever
    rows = []
    for h, held in allocated.items():
        total, reporting = sizes.get(h, (None, None))
        n: int | None = held
        busy_then = busy.get(h, 0)
        if began and h + step <= began and not n and not busy_then:  # before the fleet: a gap
            n = busy_then = None
        row: dict[str, Any] = {"t": h.isoformat(), "total": total, "reporting": reporting,
               "allocated": n, "busy": busy_then}  # fmt: skip
        if h in as_of:
            row["busy_until"] = as_of[h]
        rows.append(row)
    return rows


def _kept_steps(*, bucket: str, first: datetime, last: datetime) -> dict[datetime, int]:
    """The GPUs allocated per step kept for `bucket` (`AllocatedStep`), from the step at
    `first` on as far as they run unbroken, none starting after `last`."""
    kept = dict(
        AllocatedStep.objects.filter(bucket=bucket, at__gte=first, at__lte=last).values_list(
            "at", "gpus"
        )
    )
    run, at = {}, first
    while at in kept:
        run[at] = kept[at]
        at += _step_of(bucket)
    return run


@reporting_reads()
def allocated_per_step(
    *, bucket: str, start: datetime, end: datetime, counted: dict[datetime, int] | None = None
) -> dict[datetime, int]:
    """GPUs held by allocations at some moment of each step (an hour or a day, UTC) from
    `start`'s step to `end`'s: the closed steps written once (`AllocatedStep`) as far as they
    run on unbroken from the first, the rest counted from the holdings, but a last step left
    alone that is in `counted` (the fleet report counts its open step in the booked-ahead read)."""
    step = _step_of(bucket)
    allocated = _kept_steps(bucket=bucket, first=bucket_floor(start, bucket), last=end)
    at = bucket_floor(start, bucket) + len(allocated) * step  # the first step not kept
    if at <= end and at + step > end and counted and at in counted:
        allocated[at] = counted[at]
    elif at <= end:
        with reads_cursor() as cursor:
            cursor.execute(
                sql.ALLOCATED_PER_STEP,
                {"unit": bucket, "step": f"1 {bucket}", "start": at, "end": end},
            )
            allocated.update(cursor.fetchall())
    return allocated


@reporting_reads()
def revenue(
    *, start: datetime, end: datetime
) -> tuple[list[dict[str, Any]], dict[str, Decimal], dict[str, Decimal]]:
    """Charges per currency and rental period, refunds per currency and impaired time
    credited per currency, from one read: the range's whole days that are closed as summed
    once (`LedgerDay`, as far as they run unbroken from the first), its ledger rows before
    and after them. Amounts of two currencies are never added."""
    charges: list[dict[str, Any]] = []
    refunds: dict[str, Decimal] = {}
    credits: dict[str, Decimal] = {}
    kinds = [LedgerKind.CHARGE, LedgerKind.REFUND, LedgerKind.CREDIT]
    day = _step_of(Step.DAY)
    first = bucket_floor(start, Step.DAY)
    first = min(first if first == start else first + day, end)  # the first whole day
    kept_until = first + len(_kept_steps(bucket=Step.DAY, first=first, last=end - day)) * day
    params = {"start": start, "end": end, "kinds": kinds, "kept_from": first,
              "kept_until": kept_until}  # fmt: skip
    for row in read_rows(sql.REVENUE, params):
        kind, currency = row.pop("kind"), row["currency"]
        if kind == LedgerKind.CHARGE:
            row["period_name"] = in_language(row, "period")
            charges.append({**row, "amount": quantize(row["amount"], currency)})
        else:
            totals = refunds if kind == LedgerKind.REFUND else credits
            totals[currency] = totals.get(currency, Decimal(0)) + row["amount"]
    return (
        charges,
        {c: quantize(a, c) for c, a in refunds.items()},
        {c: quantize(a, c) for c, a in credits.items()},
    )


def booked_ahead(*, now: datetime) -> list[dict[str, Any]]:
    """GPU-days booked per active model for the next 30 days, against each model's
    capacity. `model` is the model's id, slug and name; `as_of` the instant the days are as
    of (from the capacity read model), or None (read exactly from the holdings)."""
    return held_ahead(now=now).rows


class HeldAhead(NamedTuple):
    rows: list[dict[str, Any]]  # `booked_ahead`
    allocated_now: int
    allocated_in_step: int
    as_of: datetime | None  # the days read from the capacity read model as of then; None: exact


AHEAD_DAYS = 30


@reporting_reads()
def held_ahead(*, now: datetime, step: tuple[datetime, datetime] | None = None) -> HeldAhead:
    """`booked_ahead`, the GPUs allocations hold at `now` and those they hold at some moment
    of `step` (a span of `now`'s day; a maintenance window's are not counted in either).
    The days come from the capacity read model while every model's is fresh (the oldest
    `as_of` is said), else from one read of the live holdings with the other two."""
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0)
    open_start, open_end = step or (day0, day0)
    days = [day0.date() + timedelta(days=i) for i in range(AHEAD_DAYS)]
    models = read_rows(sql.CAPACITY, {"active": NodeState.ACTIVE})
    summary = booked_ahead_summary(
        gpu_model_ids=[m["id"] for m in models], first=day0.date(), days=AHEAD_DAYS, now=now
    )
    params = {"now": now, "open_start": open_start, "open_end": open_end}
    if summary is not None:
        as_of_by_model, booked = summary
        heat = {key: us / DAY_US for key, us in booked.items()}
        with reads_cursor() as cursor:
            cursor.execute(sql.HELD_NOW_AND_OPEN, params)
            allocated_now, allocated_in_step = cursor.fetchone()
        as_of = min(as_of_by_model.values(), default=None)
    else:
        heat, allocated_now, allocated_in_step = _held_ahead_exact(day0=day0, days=days, **params)
        as_of_by_model, as_of = {}, None
    rows = []
    for model in models:
        cap = model.pop("capacity")
        cells = []
        for day in days:
            value = round(heat.get((model["id"], day), 0.0), 1)
            pct = value / cap * 100 if cap else 0
            # shade: the cell's colour strength, half the share booked (a full day is 50 %)
            cells.append({"day": day, "gpu_days": value, "pct": pct, "shade": round(pct / 2)})
        rows.append(
            {"model": model, "capacity": cap, "days": cells,
             "as_of": as_of_by_model.get(model["id"])}
        )  # fmt: skip
    return HeldAhead(rows, int(allocated_now), int(allocated_in_step), as_of)


def _held_ahead_exact(
    *, day0: datetime, days: list[date], now: datetime, open_start: datetime,
    open_end: datetime,
) -> tuple[dict[tuple[int, date], float], int, int]:  # fmt: skip
    """Per (model, day) the GPU-days booked, the GPUs held at `now` and in the open step,
    from one read of the live holdings (`sql.BOOKED_AHEAD`)."""
    # per (model, day index)
    held_us: defaultdict[tuple[int, int], Decimal] = defaultdict(Decimal)
    whole_from: defaultdict[tuple[int, int], int] = defaultdict(int)
    allocated_now = allocated_in_step = 0
    with reads_cursor() as cursor:
        cursor.execute(
            sql.BOOKED_AHEAD,
            {"day0": day0, "day_n": day0 + timedelta(days=len(days)), "day_us": DAY_US,
             "now": now, "open_start": open_start, "open_end": open_end},
        )  # fmt: skip
        for model_id, first, last, first_day_us, last_day_us, holdings, now_, in_step in cursor:
            allocated_now += now_
            allocated_in_step += in_step
            held_us[model_id, first] += first_day_us
            if last > first:  # held on to its last day, and whole on the days between
                held_us[model_id, last] += last_day_us
                whole_from[model_id, first + 1] += holdings
                whole_from[model_id, last] -= holdings
    heat = {}
    for model_id in {model_id for model_id, _i in held_us}:
        whole = 0  # GPUs held for the whole of the day
        for i, day in enumerate(days):
            whole += whole_from[model_id, i]
            heat[model_id, day] = float(held_us[model_id, i] + whole * DAY_US) / DAY_US
    return heat, allocated_now, allocated_in_step


def idle_window(*, now: datetime, hours: float = 2) -> tuple[datetime, datetime]:
    """The `hours` of rolled-up minutes that idleness is judged on: up to the end of the
    newest minute every shard of the rollup has rolled (the fleet's minutes, written with
    each shard's busy minutes in one transaction), or `now`'s minute where none is; not the
    raw samples."""
    until = rolled_until(RollupBucket.MINUTE, "fleet")
    until = until or now.replace(second=0, microsecond=0)
    until = min(until, now)
    return until - timedelta(hours=hours), until


@reporting_reads()
def idle_allocations(*, now: datetime, hours: float = 2, limit: int = 50) -> list[dict[str, Any]]:
    """Running allocations, running since before the window (`idle_window`), none of whose
    GPUs went over the active threshold in any minute rolled up since its start (each GPU's
    newest busy minute, `telemetry.models.GpuBusy`), as plain rows."""
    since, _until = idle_window(now=now, hours=hours)
    return _allocation_rows("idle", running=AllocationState.RUNNING, since=since, limit=limit)


@reporting_reads()
def fleet_report(*, days: int = 7, now: datetime | None = None) -> dict[str, Any]:
    """Everything on the fleet report, every figure including the live part. Lists are
    plain rows, so a minute's copy in the cache is cheap to write and read."""
    now = now or timezone.now()
    start = now - timedelta(days=days)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    # A dict of Any: the stubs' list of adaptable values leaves out timedelta (an interval).
    params: dict[str, Any] = {
        "now": now, "start": start, "active": NodeState.ACTIVE, "retired": NodeState.RETIRED,
        "stopped": AllocationState.STOPPED, "stoppable": _STOPPABLE,
        "impaired_min": impaired_minimum(),
    }  # fmt: skip
    with reads_cursor() as cursor:
        cursor.execute(sql.FLEET_REPORT_NOW, params)
        total, stopped_hours, impaired_hours, health = cursor.fetchone()
    health = health or {}
    # Busy and answering now: the newest minute rolled up within the last BUSY_NOW_WITHIN.
    minute = fleet_newest_minute(start=now - BUSY_NOW_WITHIN, end=now)
    idle_from, idle_until = idle_window(now=now)
    by_model, by_region, use_span = use_by_model_and_region(start=start, end=now, rolled_only=True)
    step = step_for(days)
    open_step = bucket_floor(now, bucket_of(step))
    heatmap, allocated_now, allocated_open, booked_as_of = held_ahead(
        now=now, step=(open_step, open_step + step)
    )
    over_time = fleet_over_time(
        start=start, end=now, step=step, counted={open_step: allocated_open}
    )
    charges, refunds, credits = revenue(start=start, end=now)
    troubled = node_health(skip=[NodeHealth.HEALTHY], limit=100)
    return {
        "now": now,
        "start": start,
        "total": total,
        "allocated_now": allocated_now,
        # None (all three): no minute rolled up within BUSY_NOW_WITHIN.
        "busy_now": minute and minute.busy,
        "reporting_now": minute and minute.reporting,
        "busy_until": minute and minute.until,
        "over_time": over_time,
        "by_model": by_model,
        "by_region": by_region,
        # What use by model and region covers: the rolled-up hours and days (None: none).
        "use_from": use_span and use_span[0],
        "use_until": use_span and use_span[1],
        "stopped_gpu_hours": round(float(stopped_hours), 1),
        "impaired_gpu_hours": round(float(impaired_hours), 1),
        "idle_allocations": idle_allocations(now=now),
        "idle_from": idle_from,
        "idle_until": idle_until,
        "threshold": threshold,
        # The chart's newest step, when the rollups have not closed it: up to when it is read.
        "latest_step_open": bool(over_time) and "busy_until" in over_time[-1],
        "latest_step_until": _parsed(over_time[-1].get("busy_until") if over_time else None),
        "step_is_hour": step == timedelta(hours=1),
        "revenue": charges,
        "refunds": refunds,
        "credits": credits,
        "health": health,
        "troubled": troubled,
        "troubled_count": sum(n for h, n in health.items() if h != NodeHealth.HEALTHY),
        "flags": open_flag_rows(limit=200),
        "expiring": _allocation_rows(
            "expiring", started=_STARTED, soon=now + timedelta(hours=48), limit=100
        ),
        "heatmap": heatmap,
        "booked_as_of": booked_as_of,  # the heatmap read from the capacity read model; None: exact
        "heat_days": [d["day"] for d in heatmap[0]["days"]] if heatmap else [],
    }


def fleet_report_cached(*, days: int, now: datetime | None = None) -> dict[str, Any]:
    """`fleet_report`, computed at most once a minute per range and language and kept in
    the cache for that minute: the page shows when its figures were computed (`now`)."""
    now = now or timezone.now()
    key = f"fleet-report:{get_language()}:{days}:{now:%Y%m%d%H%M}"
    context: dict[str, Any] | None = cache.get(key)
    if context is None:
        context = fleet_report(days=days, now=now)
        cache.set(key, context, timeout=60)
    return context


@reporting_reads()
def use_by_model_and_region(
    *, start: datetime, end: datetime, rolled_only: bool = False
) -> Sequence[Any]:
    """Average utilisation and GPU-hours seen per model and per region, the live part
    included. With `rolled_only`: from the fleet rollups alone, and with the span they
    cover as a third value (`telemetry.selectors.fleet_totals_rolled`)."""
    if rolled_only:
        per_group, span = fleet_totals_rolled(start=start, end=end)
    else:
        per_group = fleet_totals_by_group(start=start, end=end)
    with reads_cursor() as cursor:
        cursor.execute(sql.NAMES)
        names = {
            (kind, pk): in_language({"name_en": en, "name_pl": pl}, "name")
            for kind, pk, en, pl in cursor.fetchall()
        }
    groups: tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]] = ({}, {})
    for (model_id, region_id), totals in per_group.items():
        keys = (names.get(("model", model_id), "?"), names.get(("region", region_id), "?"))
        for group, name in zip(groups, keys, strict=True):
            row = group.setdefault(name, {"name": name, "u": 0.0, "n": 0, "s": 0.0})
            row["u"] += totals.util_sum
            row["n"] += totals.util_samples
            row["s"] += totals.covered_s
    rows = [
        [
            {"name": r["name"], "util": r["u"] / r["n"] if r["n"] else None,
             "hours": round(r["s"] / 3600, 1)}
            for r in sorted(group.values(), key=lambda r: r["name"])
        ]
        for group in groups
    ]  # fmt: skip
    return (*rows, span) if rolled_only else rows


def node_health(*, skip: list[str], limit: int | None) -> list[dict[str, Any]]:
    """Nodes in service with their health (in words too), but those whose health is in
    `skip`, the first `limit` by hostname (None: all)."""
    nodes = read_rows(sql.NODE_HEALTH, {"retired": NodeState.RETIRED, "skip": skip, "limit": limit})
    for node in nodes:
        node["health_label"] = NodeHealth(node["health"]).label
        node["region"] = in_language(node, "region")
    return nodes


def fleet_report_tables(context: dict[str, Any]) -> dict[str, tuple[list[str], list[Any]]]:
    """Each fleet report table as (header, rows), for CSV downloads."""
    tables: dict[str, tuple[list[str], list[Any]]] = {
        "over_time": (["hour_utc", "total", "reporting", "allocated", "busy"],
                      [(r["t"], r["total"], r["reporting"], r["allocated"], r["busy"])
                       for r in context["over_time"]]),
        "by_model": (["model", "avg_utilisation_pct", "gpu_hours"],
                     [(r["name"], round(r["util"] or 0, 1), r["hours"]) for r in context["by_model"]]),
        "by_region": (["region", "avg_utilisation_pct", "gpu_hours"],
                      [(r["name"], round(r["util"] or 0, 1), r["hours"]) for r in context["by_region"]]),
        "revenue": (["period", "currency", "amount", "charges"],
                    [(r["period_name"], r["currency"], r["amount"], r["bookings"]) for r in context["revenue"]]),
        "idle": (["allocation", "owner", "model", "node", "paid_until"],
                 [(a["id"], a["owner"], a["model"], a["node"], a["paid_until"].isoformat())
                  for a in context["idle_allocations"]]),
        "expiring": (["allocation", "owner", "model", "state", "paid_until"],
                     [(a["id"], a["owner"], a["model"], a["state"], a["paid_until"].isoformat())
                      for a in context["expiring"]]),
        "nodes": (["hostname", "region", "model", "health", "detail", "last_good_poll"],
                  [(n["hostname"], n["region"], n["model"], n["health"], n["health_detail"],
                    n["last_good_poll_at"].isoformat() if n["last_good_poll_at"] else "")
                   for n in node_health(skip=[], limit=None)]),  # every node, healthy too
        "flags": (["node", "gpu", "kind", "severity", "detail", "opened", "last_seen"],
                  [(f["node"], "" if f["gpu_index"] is None else f["gpu_index"], f["kind"],
                    f["severity"], f["detail"], f["opened_at"].isoformat(), f["last_seen_at"].isoformat())
                   for f in context["flags"]]),
        "booked_ahead": (["model", "day", "gpu_days"],
                         [(row["model"]["slug"], d["day"], d["gpu_days"]) for row in context["heatmap"]
                          for d in row["days"]]),
    }  # fmt: skip
    return tables
