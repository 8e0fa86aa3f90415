"""Usage reads: an allocation's paid time against its use, its charts, the staff dashboard.

Dashboards read rollups (per minute, per hour), never the raw samples, so their cost does
not grow with the polling rate.
"""

import csv
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Avg, Count, F, Max, Q, Sum
from django.http import HttpResponse
from django.utils import timezone

from catalog.models import Gpu, GpuModel, Node, NodeHealth, NodeState
from rentals.models import (
    Allocation,
    AllocationGpu,
    AllocationState,
    Flag,
    GpuRollup,
    GpuSample,
    LedgerEntry,
    LedgerKind,
)

RAW_MAX_SPAN = timedelta(hours=6)
MINUTE_MAX_SPAN = timedelta(days=7)


def _active_threshold():
    return settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]


def stopped_spans(*, allocation: Allocation, now: datetime) -> list[tuple[datetime, datetime]]:
    """Spans the allocation spent stopped, from its events; each clipped to the paid period."""
    spans, since = [], None
    for event in allocation.events.all():
        if event.to_state == AllocationState.STOPPED:
            since = event.at
        elif since is not None and event.from_state == AllocationState.STOPPED:
            spans.append((since, event.at))
            since = None
    if since is not None:
        spans.append((since, min(now, allocation.paid_until)))
    return spans


def paid_timeline(*, allocation: Allocation, now: datetime) -> dict:
    start, end = allocation.paid_from, allocation.paid_until
    total = (end - start).total_seconds()

    def pct(at):
        return max(0.0, min(100.0, (at - start).total_seconds() / total * 100))

    left = max(timedelta(0), end - max(now, start))
    return {
        "now_pct": pct(now),
        "stopped": [
            {"left": pct(a), "width": max(pct(b) - pct(a), 0.4), "from": a, "to": b}
            for a, b in stopped_spans(allocation=allocation, now=now)
        ],
        "time_left": left,
        "hours_left": round(left.total_seconds() / 3600, 1),
    }


def allocation_usage(*, allocation: Allocation, now: datetime) -> dict:
    """Paid hours so far and left, running vs stopped hours, and what the GPUs did."""
    start = allocation.paid_from
    end = min(now, allocation.paid_until)
    elapsed = max(timedelta(0), end - start)
    stopped = sum(((b - a) for a, b in stopped_spans(allocation=allocation, now=now)), timedelta(0))
    gpu_ids = [held.gpu_id for held in allocation.held.all()]
    stats = {}
    busy_hours = 0.0
    idle_hours = None
    if gpu_ids and elapsed:
        stats = GpuSample.objects.filter(gpu_id__in=gpu_ids, at__gte=start, at__lt=end).aggregate(
            util_avg=Avg("utilization"),
            util_max=Max("utilization"),
            mem_max=Max("memory_used_mib"),
            samples=Count("id"),
        )
        minutes = GpuRollup.objects.filter(
            gpu_id__in=gpu_ids,
            bucket=GpuRollup.Bucket.MINUTE,
            at__gte=start,
            at__lt=end,
            utilization_avg__gt=_active_threshold(),
        ).count()
        busy_hours = round(minutes / 60 / len(gpu_ids), 2)
        energy = GpuRollup.objects.filter(
            gpu_id__in=gpu_ids, bucket=GpuRollup.Bucket.MINUTE, at__gte=start, at__lt=end
        ).aggregate(j=Sum("energy_j"))["j"]
        stats["energy_kwh"] = round(energy / 3_600_000, 3) if energy else None
        last_busy = (
            GpuSample.objects.filter(
                gpu_id__in=gpu_ids, at__gte=start, utilization__gt=_active_threshold()
            )
            .order_by("-at")
            .values_list("at", flat=True)
            .first()
        )
        if allocation.state == AllocationState.RUNNING:
            idle_since = last_busy or start
            idle_hours = round((end - idle_since).total_seconds() / 3600, 1)
    return {
        "paid_hours": round(elapsed.total_seconds() / 3600, 1),
        "hours_left": round(
            max(timedelta(0), allocation.paid_until - now).total_seconds() / 3600, 1
        ),
        "stopped_hours": round(stopped.total_seconds() / 3600, 1),
        "running_hours": round((elapsed - stopped).total_seconds() / 3600, 1),
        "busy_hours": busy_hours,
        "util_avg": round(stats["util_avg"], 1) if stats.get("util_avg") is not None else None,
        "util_max": stats.get("util_max"),
        "mem_max_mib": stats.get("mem_max"),
        "energy_kwh": stats.get("energy_kwh"),
        "idle_hours": idle_hours,
        "idle_warning": idle_hours is not None and idle_hours >= 2,
    }


def allocation_series(
    *, allocation: Allocation, start: datetime | None = None, end: datetime | None = None
) -> dict:
    """Per-GPU series for the charts: raw samples for short ranges, rollups for long ones."""
    now = timezone.now()
    end = min(end or now, allocation.paid_until, now)
    start = max(start or end - timedelta(hours=1), allocation.paid_from)
    gpus = {held.gpu_id: held.gpu for held in allocation.held.all()}
    span = end - start
    series = {gpu_id: [] for gpu_id in gpus}
    if span <= RAW_MAX_SPAN:
        source = "raw"
        rows = (
            GpuSample.objects.filter(gpu_id__in=gpus, at__gte=start, at__lte=end)
            .order_by("at")
            .values_list(
                "gpu_id", "at", "utilization", "memory_used_mib", "memory_total_mib",
                "power_w", "temperature_c",
            )
        )  # fmt: skip
    else:
        bucket = GpuRollup.Bucket.MINUTE if span <= MINUTE_MAX_SPAN else GpuRollup.Bucket.HOUR
        source = bucket
        rows = (
            GpuRollup.objects.filter(gpu_id__in=gpus, bucket=bucket, at__gte=start, at__lte=end)
            .order_by("at")
            .values_list(
                "gpu_id", "at", "utilization_avg", "memory_used_max_mib", "memory_total_mib",
                "power_avg_w", "temperature_max_c",
            )
        )  # fmt: skip
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
    threshold = _active_threshold()
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


def dashboard_csv(context: dict, table: str) -> HttpResponse:
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
    if table not in tables:
        table = "over_time"
    header, rows = tables[table]
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="anchorgpu-{table}.csv"'
    writer = csv.writer(response)
    writer.writerow(header)
    writer.writerows(rows)
    return response
