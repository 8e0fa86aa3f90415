"""An allocation's paid time against its use: stopped spans, usage summary, chart series.

These join the allocation (rentals) with what its GPUs did (telemetry).
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Avg, Count, Max, Sum
from django.utils import timezone

from rentals.models import Allocation, AllocationState
from telemetry.models import GpuRollup, GpuSample
from telemetry.selectors import gpu_series


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


def time_left(*, allocation: Allocation, now: datetime) -> timedelta:
    return max(timedelta(0), allocation.paid_until - max(now, allocation.paid_from))


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
    """The allocation's GPUs within its paid period (default: the last hour of it)."""
    now = timezone.now()
    end = min(end or now, allocation.paid_until, now)
    start = max(start or end - timedelta(hours=1), allocation.paid_from)
    return gpu_series(gpus=[held.gpu for held in allocation.held.all()], start=start, end=end)
