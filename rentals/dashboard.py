"""The staff dashboard: the fleet's use over time, by model and region, money, health.

It joins allocations and the ledger (rentals) with rollups and flags (telemetry). Up to a
week it reads hourly rollups; longer ranges read daily ones.
"""

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Avg, Count, F, Q, Sum
from django.utils import timezone

from catalog.models import Gpu, GpuModel, Node, NodeHealth, NodeState
from rentals.models import Allocation, AllocationGpu, AllocationState, LedgerEntry, LedgerKind
from rentals.usage import stopped_spans
from telemetry.models import Flag, GpuRollup, GpuSample

_ALLOCATED_PER_STEP = """
SELECT h, count(ag.id)
FROM generate_series(date_trunc(%(unit)s, %(start)s::timestamptz), %(end)s, %(step)s::interval) AS h
LEFT JOIN rentals_allocationgpu ag
  ON NOT ag.released AND ag.starts_at < h + %(step)s::interval AND ag.ends_at > h
GROUP BY h ORDER BY h
"""

_BOOKED_AHEAD = """
SELECT m.slug, d::date,
       -- least/greatest skip NULLs, so rows without a holding must be filtered out
       coalesce(sum(extract(epoch FROM least(ag.ends_at, d + interval '1 day')
                                    - greatest(ag.starts_at, d))) FILTER (WHERE ag.id IS NOT NULL)
                / 86400.0, 0)
FROM generate_series(date_trunc('day', %(now)s::timestamptz), %(now)s + interval '29 days', interval '1 day') AS d
CROSS JOIN catalog_gpumodel m
LEFT JOIN catalog_node n ON n.gpu_model_id = m.id
LEFT JOIN catalog_gpu g ON g.node_id = n.id
LEFT JOIN rentals_allocationgpu ag ON ag.gpu_id = g.id AND NOT ag.released
   AND ag.starts_at < d + interval '1 day' AND ag.ends_at > d
WHERE m.is_active
GROUP BY m.slug, d ORDER BY m.slug, d
"""


def fleet_dashboard(*, days: int = 7, now: datetime | None = None) -> dict:
    """Everything on the staff dashboard. Up to a week it reads hourly rollups; longer
    ranges read daily ones, so 90 days costs about what 4 days of hours do."""
    now = now or timezone.now()
    start = now - timedelta(days=days)
    bucket = GpuRollup.Bucket.HOUR if days <= 7 else GpuRollup.Bucket.DAY
    threshold = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    active_gpus = Gpu.objects.filter(node__state=NodeState.ACTIVE)
    total = active_gpus.count()
    allocated_now = AllocationGpu.objects.filter(
        released=False, starts_at__lte=now, ends_at__gt=now
    ).count()
    busy_now = (
        GpuSample.objects.filter(at__gte=now - timedelta(minutes=2), utilization__gt=threshold)
        .values("gpu_id")
        .distinct()
        .count()
    )
    with connection.cursor() as cursor:
        cursor.execute(
            _ALLOCATED_PER_STEP,
            {"unit": bucket, "step": f"1 {bucket}", "start": start, "end": now},
        )
        allocated = {h: n for h, n in cursor.fetchall()}
        cursor.execute(_BOOKED_AHEAD, {"now": now})
        heat = defaultdict(list)
        for slug, day, gpu_days in cursor.fetchall():
            heat[slug].append((day, round(float(gpu_days), 1)))
    busy = dict(
        GpuRollup.objects.filter(bucket=bucket, at__gte=start, utilization_avg__gt=threshold)
        .values_list("at")
        .annotate(n=Count("gpu_id"))
        .values_list("at", "n")
    )
    over_time = [
        {"t": h.isoformat(), "total": total, "allocated": n, "busy": busy.get(h, 0)}
        for h, n in allocated.items()
    ]
    rollups = GpuRollup.objects.filter(bucket=bucket, at__gte=start)
    hours_per_row = 1 if bucket == GpuRollup.Bucket.HOUR else 24
    by_model = list(
        rollups.values(name=F("gpu__node__gpu_model__name"))
        .annotate(util=Avg("utilization_avg"), hours=Count("id") * hours_per_row)
        .order_by("name")
    )
    by_region = list(
        rollups.values(name=F("gpu__node__region__name"))
        .annotate(util=Avg("utilization_avg"), hours=Count("id") * hours_per_row)
        .order_by("name")
    )
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
    idle_since = now - timedelta(hours=2)
    busy_recent = GpuSample.objects.filter(at__gte=idle_since, utilization__gt=threshold).values(
        "gpu_id"
    )
    idle_allocations = (
        Allocation.objects.filter(state=AllocationState.RUNNING, paid_from__lte=idle_since)
        .exclude(held__gpu_id__in=busy_recent)
        .select_related("user", "gpu_model", "node")
        .order_by("paid_until")[:50]
    )
    revenue = list(
        LedgerEntry.objects.filter(at__gte=start, kind=LedgerKind.CHARGE)
        .values("currency", period_name=F("allocation__period__name"))
        .annotate(amount=Sum("amount"), bookings=Count("id"))
        .order_by("period_name")
    )
    refunds = LedgerEntry.objects.filter(at__gte=start, kind=LedgerKind.REFUND).aggregate(
        s=Sum("amount")
    )["s"]
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
    flags = Flag.objects.filter(closed_at__isnull=True).select_related("gpu", "gpu__node")[:200]
    expiring = (
        Allocation.objects.filter(
            state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
            paid_until__lte=now + timedelta(hours=48),
        )
        .select_related("user", "gpu_model", "node")
        .order_by("paid_until")[:100]
    )
    models = list(GpuModel.objects.filter(is_active=True).order_by("name"))
    capacity = dict(
        active_gpus.values_list("node__gpu_model__slug")
        .annotate(n=Count("id"))
        .values_list("node__gpu_model__slug", "n")
    )
    heatmap = [
        {
            "model": m,
            "capacity": capacity.get(m.slug, 0),
            "days": [
                {
                    "day": d,
                    "gpu_days": v,
                    "pct": v / capacity[m.slug] * 100 if capacity.get(m.slug) else 0,
                }
                for d, v in heat.get(m.slug, [])
            ],
        }
        for m in models
    ]
    return {
        "now": now,
        "start": start,
        "total": total,
        "allocated_now": allocated_now,
        "busy_now": busy_now,
        "over_time": over_time,
        "by_model": by_model,
        "by_region": by_region,
        "stopped_gpu_hours": round(stopped_gpu_hours, 1),
        "idle_allocations": idle_allocations,
        "revenue": revenue,
        "refunds": refunds,
        "health": health,
        "troubled": troubled,
        "flags": flags,
        "expiring": expiring,
        "heatmap": heatmap,
        "heat_days": [d for d, _ in heat.get(models[0].slug, [])] if models else [],
    }


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
        "flags": (["node", "gpu", "kind", "detail", "opened"],
                  [(f.gpu.node.hostname, f.gpu.index, f.kind, f.detail, f.opened_at.isoformat())
                   for f in context["flags"]]),
        "booked_ahead": (["model", "day", "gpu_days"],
                         [(row["model"].slug, d["day"], d["gpu_days"]) for row in context["heatmap"]
                          for d in row["days"]]),
    }  # fmt: skip
    return tables
