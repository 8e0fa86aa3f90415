"""The staff dashboard: the fleet's use over time, by model and region, money, health.

It joins allocations and the ledger (rentals) with rollups and flags (telemetry). Up to a
week it reads hourly rollups; longer ranges read daily ones.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from catalog.models import GpuModel, Node, NodeHealth, NodeState, Region
from core.db import reads_cursor, reporting_reads
from core.money import quantize
from rentals.models import Allocation, AllocationState, LedgerEntry, LedgerKind
from rentals.usage import stopped_spans
from telemetry.models import FleetRollup, GpuRollup, GpuSample
from telemetry.selectors import (
    busy_gpus,
    flag_list,
    fleet_busy_by_bucket,
    fleet_sizes,
    fleet_totals_by_group,
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


_NOW = """
SELECT (SELECT coalesce(sum(gpu_count), 0) FROM catalog_node WHERE state = 'active'),
       (SELECT count(*) FROM rentals_allocationgpu
        WHERE NOT released AND starts_at <= %(now)s AND ends_at > %(now)s),
       (SELECT count(DISTINCT gpu_id) FROM telemetry_gpusample
        WHERE at >= %(since)s AND utilization > %(threshold)s)
"""


def step_for(days: float) -> timedelta:
    """Hours up to a week, days beyond: 90 days costs about what 4 days of hours do."""
    return timedelta(hours=1) if days <= 7 else timedelta(days=1)


@reporting_reads()
def fleet_over_time(*, start: datetime, end: datetime, step: timedelta) -> list[dict]:
    """Per step: the fleet's size as recorded then (None where nothing was recorded),
    GPUs allocated, and GPUs busy (average utilisation over the threshold). Steps the
    rollups have not closed yet, the current one included, are read live."""
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
        {"t": h.isoformat(), "total": sizes.get(h), "allocated": n, "busy": busy.get(h, 0)}
        for h, n in allocated.items()
    ]


@reporting_reads()
def revenue(*, start: datetime, end: datetime) -> tuple[list[dict], dict]:
    """Charges per currency and rental period, and refunds per currency: amounts of two
    currencies are never added."""
    rows = list(
        LedgerEntry.objects.filter(at__gte=start, at__lt=end, kind=LedgerKind.CHARGE)
        .values("currency", period_name=F("allocation__period__name"))
        .annotate(amount=Sum("amount"), bookings=Count("id"))
        .order_by("currency", "period_name")
    )
    refunds = dict(
        LedgerEntry.objects.filter(at__gte=start, at__lt=end, kind=LedgerKind.REFUND)
        .values_list("currency")
        .annotate(s=Sum("amount"))
        .values_list("currency", "s")
    )
    for row in rows:
        row["amount"] = quantize(row["amount"], row["currency"])
    return rows, {c: quantize(a, c) for c, a in refunds.items()}


@reporting_reads()
def booked_ahead(*, now: datetime) -> list[dict]:
    """GPU-days booked per model for the next 30 days, against each model's capacity."""
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [day0 + timedelta(days=i) for i in range(30)]
    with reads_cursor() as cursor:
        cursor.execute(_BOOKED_AHEAD, {"day0": day0, "day_n": days[-1] + timedelta(days=1)})
        heat = {(model_id, day): float(v) for model_id, day, v in cursor.fetchall()}
    capacity = dict(
        Node.objects.filter(state=NodeState.ACTIVE)
        .values_list("gpu_model_id")
        .annotate(n=Sum("gpu_count"))
        .values_list("gpu_model_id", "n")
    )
    rows = []
    for model in GpuModel.objects.filter(is_active=True).order_by("name"):
        cap = capacity.get(model.pk, 0)
        cells = []
        for day in days:
            value = round(heat.get((model.pk, day.date()), 0.0), 1)
            pct = value / cap * 100 if cap else 0
            # shade: the cell's colour strength, half the share booked (a full day is 50 %)
            cells.append(
                {"day": day.date(), "gpu_days": value, "pct": pct, "shade": round(pct / 2)}
            )
        rows.append({"model": model, "capacity": cap, "days": cells})
    return rows


def idle_allocations(*, now: datetime, hours: float = 2, limit: int = 50):
    """Running allocations whose GPUs have not been busy for `hours`."""
    since = now - timedelta(hours=hours)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    busy_recent = GpuSample.objects.filter(at__gte=since, utilization__gt=threshold).values(
        "gpu_id"
    )
    return (
        Allocation.objects.filter(state=AllocationState.RUNNING, paid_from__lte=since)
        .exclude(held__gpu_id__in=busy_recent)
        .select_related("user", "gpu_model", "node")
        .order_by("paid_until")[:limit]
    )


@reporting_reads()
def fleet_dashboard(*, days: int = 7, now: datetime | None = None) -> dict:
    """Everything on the staff dashboard, every figure including the live part."""
    now = now or timezone.now()
    start = now - timedelta(days=days)
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    with reads_cursor() as cursor:
        cursor.execute(
            _NOW, {"now": now, "since": now - timedelta(minutes=2), "threshold": threshold}
        )
        total, allocated_now, busy_now = cursor.fetchone()
    by_model, by_region = use_by_model_and_region(start=start, end=now)
    live = Allocation.objects.filter(
        Q(state__in=[AllocationState.RUNNING, AllocationState.STOPPED]) | Q(paid_until__gte=start),
        paid_from__lte=now,
    ).prefetch_related("events")
    stopped_gpu_hours = 0.0
    for allocation in live:
        for a, b in stopped_spans(allocation=allocation, now=now):
            overlap = (min(b, now) - max(a, start)).total_seconds()
            if overlap > 0:
                stopped_gpu_hours += overlap / 3600 * allocation.gpu_count
    charges, refunds = revenue(start=start, end=now)
    health = dict(
        Node.objects.exclude(state=NodeState.RETIRED)
        .values_list("health")
        .annotate(n=Count("id"))
        .values_list("health", "n")
    )
    troubled = (
        Node.objects.exclude(state=NodeState.RETIRED)
        .exclude(health=NodeHealth.HEALTHY)
        .select_related("region", "gpu_model")
        .order_by("hostname")[:100]
    )
    flags = flag_list(state="open")[:200]
    expiring = (
        Allocation.objects.filter(
            state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
            paid_until__lte=now + timedelta(hours=48),
        )
        .select_related("user", "gpu_model", "node")
        .order_by("paid_until")[:100]
    )
    heatmap = booked_ahead(now=now)
    return {
        "now": now,
        "start": start,
        "total": total,
        "allocated_now": allocated_now,
        "busy_now": busy_now,
        "over_time": fleet_over_time(start=start, end=now, step=step_for(days)),
        "by_model": by_model,
        "by_region": by_region,
        "stopped_gpu_hours": round(stopped_gpu_hours, 1),
        "idle_allocations": idle_allocations(now=now),
        "revenue": charges,
        "refunds": refunds,
        "health": health,
        "troubled": troubled,
        "troubled_count": sum(n for h, n in health.items() if h != NodeHealth.HEALTHY),
        "flags": flags,
        "expiring": expiring,
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
        with reporting_reads():
            context = fleet_dashboard(days=days, now=now)
            for name in ("idle_allocations", "troubled", "flags", "expiring"):
                context[name] = list(context[name])
        cache.set(key, context, timeout=60)
    return context


@reporting_reads()
def use_by_model_and_region(*, start, end):
    """Average utilisation and GPU-hours seen per model and per region, the live part
    included."""
    per_group = fleet_totals_by_group(start=start, end=end)
    models = dict(GpuModel.objects.values_list("pk", "name"))
    regions = dict(Region.objects.values_list("pk", "name"))
    groups = ({}, {})
    for (model_id, region_id), totals in per_group.items():
        names = (models.get(model_id, "?"), regions.get(region_id, "?"))
        for group, name in zip(groups, names, strict=True):
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
        "over_time": (["hour_utc", "total", "allocated", "busy"],
                      [(r["t"], r["total"], r["allocated"], r["busy"]) for r in context["over_time"]]),
        "by_model": (["model", "avg_utilisation_pct", "gpu_hours"],
                     [(r["name"], round(r["util"] or 0, 1), r["hours"]) for r in context["by_model"]]),
        "by_region": (["region", "avg_utilisation_pct", "gpu_hours"],
                      [(r["name"], round(r["util"] or 0, 1), r["hours"]) for r in context["by_region"]]),
        "revenue": (["period", "currency", "amount", "charges"],
                    [(r["period_name"], r["currency"], r["amount"], r["bookings"]) for r in context["revenue"]]),
        "idle": (["allocation", "owner", "model", "node", "paid_until"],
                 [(a.pk, a.user.username, a.gpu_model.name, a.node.hostname, a.paid_until.isoformat())
                  for a in context["idle_allocations"]]),
        "expiring": (["allocation", "owner", "model", "state", "paid_until"],
                     [(a.pk, a.user.username, a.gpu_model.name, a.state, a.paid_until.isoformat())
                      for a in context["expiring"]]),
        "nodes": (["hostname", "region", "model", "health", "detail", "last_good_poll"],
                  [(n.hostname, n.region.name, n.gpu_model.name, n.health, n.health_detail,
                    n.last_good_poll_at.isoformat() if n.last_good_poll_at else "")
                   for n in context["troubled"]]),
        "flags": (["node", "gpu", "kind", "severity", "detail", "opened", "last_seen"],
                  [(f.node.hostname, f.gpu.index if f.gpu_id else "", f.kind, f.severity, f.detail,
                    f.opened_at.isoformat(), f.last_seen_at.isoformat())
                   for f in context["flags"]]),
        "booked_ahead": (["model", "day", "gpu_days"],
                         [(row["model"].slug, d["day"], d["gpu_days"]) for row in context["heatmap"]
                          for d in row["days"]]),
    }  # fmt: skip
    return tables
