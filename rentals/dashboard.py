"""The staff dashboard: the fleet's use over time, by model and region, money, health.

It joins allocations and the ledger (rentals) with rollups and flags (telemetry). Up to a
week it reads hourly rollups; longer ranges read daily ones.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone

from catalog.models import NodeHealth
from core.db import read_rows, reads_cursor, reporting_reads
from core.money import quantize
from rentals.models import LedgerKind
from telemetry.models import FleetRollup, GpuRollup
from telemetry.selectors import (
    busy_gpus,
    fleet_busy_by_bucket,
    fleet_sizes,
    fleet_totals_by_group,
    open_flag_rows,
    rolled_until,
)

# Each holding in the range counted in the steps it touches (a join of every step with
# every holding grew with both); steps without any still come back, with 0.
_ALLOCATED_PER_STEP = """
WITH first AS (
    SELECT date_trunc(%(unit)s, %(start)s::timestamptz) AS at
), steps AS (
    SELECT generate_series(first.at, %(end)s, %(step)s::interval) AS h FROM first
), held AS (
    SELECT h, count(*) AS n
    FROM first, rentals_allocationgpu ag
    CROSS JOIN LATERAL generate_series(
        greatest(date_trunc(%(unit)s, ag.starts_at), first.at),
        least(ag.ends_at - interval '1 microsecond', %(end)s), %(step)s::interval) AS h
    WHERE NOT ag.released AND ag.ends_at > first.at
      AND ag.starts_at < %(end)s::timestamptz + %(step)s::interval
    GROUP BY h
)
SELECT steps.h, coalesce(held.n, 0) FROM steps LEFT JOIN held USING (h) ORDER BY steps.h
"""

# Each holding in the next 30 days spread over the days it touches: reads the holdings,
# not every model × node × GPU × day.
_BOOKED_AHEAD = """
SELECT a.gpu_model_id, d::date,
       sum(extract(epoch FROM least(ag.ends_at, d + interval '1 day') - greatest(ag.starts_at, d)))
       / 86400.0
FROM rentals_allocationgpu ag
JOIN rentals_allocation a ON a.id = ag.allocation_id
CROSS JOIN LATERAL generate_series(
    greatest(date_trunc('day', ag.starts_at), %(day0)s), least(ag.ends_at, %(day_n)s) - interval '1 microsecond',
    interval '1 day') AS d
WHERE NOT ag.released AND ag.starts_at < %(day_n)s AND ag.ends_at > %(day0)s
GROUP BY a.gpu_model_id, d
"""


# The page's top line in one statement: GPUs in the fleet, allocated, busy and answering
# telemetry now (samples of the last two minutes), GPU-hours
# paid but stopped within the range (each stop to the next event leaving "stopped", or to
# the end of the paid period; clipped to the range) and nodes per health.
_NOW = """
WITH recent AS MATERIALIZED (
    SELECT gpu_id, utilization FROM telemetry_gpusample WHERE at >= %(since)s
)
SELECT (SELECT coalesce(sum(gpu_count), 0) FROM catalog_node WHERE state = 'active'),
       (SELECT count(*) FROM rentals_allocationgpu
        WHERE NOT released AND starts_at <= %(now)s AND ends_at > %(now)s),
       (SELECT count(DISTINCT gpu_id) FILTER (WHERE utilization > %(threshold)s)
        FROM recent),
       (SELECT count(DISTINCT gpu_id) FROM recent),
       (SELECT coalesce(sum(a.gpu_count * extract(epoch FROM
                    least(coalesce(back.at, a.paid_until), %(now)s) - greatest(stop.at, %(start)s))),
                0) / 3600
        FROM rentals_allocation a
        JOIN rentals_allocationevent stop ON stop.allocation_id = a.id AND stop.to_state = 'stopped'
        LEFT JOIN LATERAL (
            SELECT e.at FROM rentals_allocationevent e
            WHERE e.allocation_id = a.id AND e.from_state = 'stopped'
              AND (e.at, e.id) > (stop.at, stop.id)
            ORDER BY e.at, e.id LIMIT 1
        ) AS back ON true
        WHERE (a.state IN ('running', 'stopped') OR a.paid_until >= %(start)s)
          AND a.paid_from <= %(now)s
          AND least(coalesce(back.at, a.paid_until), %(now)s) > greatest(stop.at, %(start)s)),
       (SELECT json_object_agg(health, n ORDER BY health)
        FROM (SELECT health, count(*) AS n FROM catalog_node WHERE state <> 'retired'
              GROUP BY health) AS h)
"""

_REVENUE = """
SELECT l.kind, l.currency, p.name AS period_name, sum(l.amount) AS amount, count(*) AS bookings
FROM rentals_ledgerentry l
JOIN rentals_allocation a ON a.id = l.allocation_id
JOIN catalog_rentalperiod p ON p.id = a.period_id
WHERE l.at >= %(start)s AND l.at < %(end)s AND l.kind IN ('charge', 'refund')
GROUP BY l.kind, l.currency, p.name
ORDER BY l.currency, p.name
"""

_CAPACITY = """
SELECT m.id, m.slug, m.name, coalesce(sum(n.gpu_count), 0) AS capacity
FROM catalog_gpumodel m
LEFT JOIN catalog_node n ON n.gpu_model_id = m.id AND n.state = 'active'
WHERE m.is_active
GROUP BY m.id
ORDER BY m.name
"""

_NAMES = """
SELECT 'model', id, name FROM catalog_gpumodel
UNION ALL
SELECT 'region', id, name FROM catalog_region
"""

_TROUBLED = """
SELECT n.hostname, n.health, n.health_detail, n.last_good_poll_at, r.name AS region,
       m.name AS model
FROM catalog_node n
JOIN catalog_region r ON r.id = n.region_id
JOIN catalog_gpumodel m ON m.id = n.gpu_model_id
WHERE n.state <> 'retired' AND n.health <> 'healthy'
ORDER BY n.hostname
LIMIT 100
"""

# Allocations as the dashboard's lists show them; `{where}` picks and orders them.
_ALLOCATIONS = """
SELECT a.id, a.gpu_count, a.state, a.paid_until, m.slug AS model_slug, m.name AS model,
       u.username AS owner, n.hostname AS node
FROM rentals_allocation a
JOIN catalog_gpumodel m ON m.id = a.gpu_model_id
JOIN catalog_node n ON n.id = a.node_id
JOIN {users} u ON u.id = a.user_id
WHERE {where}
ORDER BY a.paid_until
LIMIT %(limit)s
"""

_EXPIRING = "a.state IN ('running', 'stopped') AND a.paid_until <= %(soon)s"

# Running since before `since` and none of its GPUs over the threshold since then.
_IDLE = """
a.state = 'running' AND a.paid_from <= %(since)s AND NOT EXISTS (
    SELECT 1 FROM rentals_allocationgpu ag
    JOIN telemetry_gpusample s ON s.gpu_id = ag.gpu_id
    WHERE ag.allocation_id = a.id AND s.at >= %(since)s AND s.utilization > %(threshold)s)
"""


def _allocation_rows(where: str, **params) -> list[dict]:
    users = get_user_model()._meta.db_table
    return read_rows(_ALLOCATIONS.format(users=users, where=where), params)


def step_for(days: float) -> timedelta:
    """Hours up to a week, days beyond: 90 days costs about what 4 days of hours do."""
    return timedelta(hours=1) if days <= 7 else timedelta(days=1)


@reporting_reads()
def fleet_over_time(*, start: datetime, end: datetime, step: timedelta) -> list[dict]:
    """Per step: the fleet's size as recorded then and the fewest of its GPUs whose
    telemetry answered a round (both None where nothing was recorded), GPUs allocated, and
    GPUs busy (average utilisation over the threshold, so at most those answering). Steps
    the rollups have not closed yet, the current one included, are read live."""
    bucket = GpuRollup.Bucket.HOUR if step == timedelta(hours=1) else GpuRollup.Bucket.DAY
    with reads_cursor() as cursor:
        cursor.execute(
            _ALLOCATED_PER_STEP,
            {"unit": bucket, "step": f"1 {bucket}", "start": start, "end": end},
        )
        allocated = {h: n for h, n in cursor.fetchall()}
    busy = fleet_busy_by_bucket(bucket=bucket, start=min(allocated, default=start), end=end)
    rolled = rolled_until(bucket, FleetRollup) or start
    for h in allocated:
        if h + step > rolled:
            busy[h] = busy_gpus(start=max(h, start), end=min(h + step, end))
    sizes = fleet_sizes(start=min(allocated, default=start), end=end, step=step)
    return [
        {"t": h.isoformat(), "total": size[0], "reporting": size[1], "allocated": n,
         "busy": busy.get(h, 0)}
        for h, n in allocated.items()
        for size in [sizes.get(h, (None, None))]
    ]  # fmt: skip


@reporting_reads()
def revenue(*, start: datetime, end: datetime) -> tuple[list[dict], dict]:
    """Charges per currency and rental period, and refunds per currency: amounts of two
    currencies are never added."""
    charges, refunds = [], {}
    for row in read_rows(_REVENUE, {"start": start, "end": end}):
        kind, currency = row.pop("kind"), row["currency"]
        if kind == LedgerKind.CHARGE:
            charges.append({**row, "amount": quantize(row["amount"], currency)})
        else:
            refunds[currency] = refunds.get(currency, 0) + row["amount"]
    return charges, {c: quantize(a, c) for c, a in refunds.items()}


@reporting_reads()
def booked_ahead(*, now: datetime) -> list[dict]:
    """GPU-days booked per active model for the next 30 days, against each model's
    capacity. `model` is the model's id, slug and name."""
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [day0.date() + timedelta(days=i) for i in range(30)]
    with reads_cursor() as cursor:
        cursor.execute(_BOOKED_AHEAD, {"day0": day0, "day_n": day0 + timedelta(days=30)})
        heat = {(model_id, day): float(v) for model_id, day, v in cursor.fetchall()}
    rows = []
    for model in read_rows(_CAPACITY):
        cap = model.pop("capacity")
        cells = []
        for day in days:
            value = round(heat.get((model["id"], day), 0.0), 1)
            pct = value / cap * 100 if cap else 0
            # shade: the cell's colour strength, half the share booked (a full day is 50 %)
            cells.append({"day": day, "gpu_days": value, "pct": pct, "shade": round(pct / 2)})
        rows.append({"model": model, "capacity": cap, "days": cells})
    return rows


@reporting_reads()
def idle_allocations(*, now: datetime, hours: float = 2, limit: int = 50) -> list[dict]:
    """Running allocations whose GPUs have not been busy for `hours`, as plain rows."""
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    return _allocation_rows(
        _IDLE, since=now - timedelta(hours=hours), threshold=threshold, limit=limit
    )


@reporting_reads()
def fleet_dashboard(*, days: int = 7, now: datetime | None = None) -> dict:
    """Everything on the staff dashboard, every figure including the live part. Lists are
    plain rows, so a minute's copy in the cache is cheap to write and read."""
    now = now or timezone.now()
    start = now - timedelta(days=days)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    with reads_cursor() as cursor:
        cursor.execute(
            _NOW,
            {"now": now, "start": start, "since": now - timedelta(minutes=2),
             "threshold": threshold},
        )  # fmt: skip
        total, allocated_now, busy_now, reporting_now, stopped_hours, health = cursor.fetchone()
    health = health or {}
    by_model, by_region = use_by_model_and_region(start=start, end=now)
    charges, refunds = revenue(start=start, end=now)
    troubled = read_rows(_TROUBLED)
    for node in troubled:
        node["health_label"] = NodeHealth(node["health"]).label
    heatmap = booked_ahead(now=now)
    return {
        "now": now,
        "start": start,
        "total": total,
        "allocated_now": allocated_now,
        "busy_now": busy_now,
        "reporting_now": reporting_now,
        "over_time": fleet_over_time(start=start, end=now, step=step_for(days)),
        "by_model": by_model,
        "by_region": by_region,
        "stopped_gpu_hours": round(float(stopped_hours), 1),
        "idle_allocations": idle_allocations(now=now),
        "revenue": charges,
        "refunds": refunds,
        "health": health,
        "troubled": troubled,
        "troubled_count": sum(n for h, n in health.items() if h != NodeHealth.HEALTHY),
        "flags": open_flag_rows(limit=200),
        "expiring": _allocation_rows(_EXPIRING, soon=now + timedelta(hours=48), limit=100),
        "heatmap": heatmap,
        "heat_days": [d["day"] for d in heatmap[0]["days"]] if heatmap else [],
    }


def fleet_dashboard_cached(*, days: int, now: datetime | None = None) -> dict:
    """`fleet_dashboard`, computed at most once a minute per range and kept in the cache
    for that minute: the page shows when its figures were computed (`now`)."""
    now = now or timezone.now()
    key = f"fleet-dashboard:{days}:{now:%Y%m%d%H%M}"
    context = cache.get(key)
    if context is None:
        context = fleet_dashboard(days=days, now=now)
        cache.set(key, context, timeout=60)
    return context


@reporting_reads()
def use_by_model_and_region(*, start, end):
    """Average utilisation and GPU-hours seen per model and per region, the live part
    included."""
    per_group = fleet_totals_by_group(start=start, end=end)
    with reads_cursor() as cursor:
        cursor.execute(_NAMES)
        names = {(kind, pk): name for kind, pk, name in cursor.fetchall()}
    groups = ({}, {})
    for (model_id, region_id), totals in per_group.items():
        keys = (names.get(("model", model_id), "?"), names.get(("region", region_id), "?"))
        for group, name in zip(groups, keys, strict=True):
            row = group.setdefault(name, {"name": name, "u": 0.0, "n": 0, "s": 0.0})
            row["u"] += totals.util_sum
            row["n"] += totals.util_samples
            row["s"] += totals.covered_s
    return [
        [
            {"name": r["name"], "util": r["u"] / r["n"] if r["n"] else None,
             "hours": round(r["s"] / 3600, 1)}
            for r in sorted(group.values(), key=lambda r: r["name"])
        ]
        for group in groups
    ]  # fmt: skip


def dashboard_tables(context: dict) -> dict[str, tuple[list[str], list]]:
    """Each dashboard table as (header, rows), for CSV downloads."""
    tables = {
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
                   for n in context["troubled"]]),
        "flags": (["node", "gpu", "kind", "severity", "detail", "opened", "last_seen"],
                  [(f["node"], "" if f["gpu_index"] is None else f["gpu_index"], f["kind"],
                    f["severity"], f["detail"], f["opened_at"].isoformat(), f["last_seen_at"].isoformat())
                   for f in context["flags"]]),
        "booked_ahead": (["model", "day", "gpu_days"],
                         [(row["model"]["slug"], d["day"], d["gpu_days"]) for row in context["heatmap"]
                          for d in row["days"]]),
    }  # fmt: skip
    return tables
