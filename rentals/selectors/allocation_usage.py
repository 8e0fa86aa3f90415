"""One allocation's paid time against its use: stopped spans, usage summary, chart series.

These join the allocation (rentals) with what its GPUs did (telemetry).
"""

from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.utils import timezone

from rentals.models import Allocation, AllocationGpu, AllocationState, HoldingEdge
from rentals.models.edges import holding_edges, hour_floor
from telemetry.models import GpuSample
from telemetry.selectors import Totals, gpu_series, gpu_totals, raw_samples_from


def _active_threshold() -> float:
    threshold: float = settings.ANCHORGPU["ACTIVE_UTILISATION_PCT"]
    return threshold


def stopped_spans(*, allocation: Allocation, now: datetime) -> list[tuple[datetime, datetime]]:
    """Spans the allocation spent stopped, from its events; each clipped to the paid period."""
    spans, since = [], None
    for event in allocation.events.all():
        if event.to_state == AllocationState.STOPPED:
            since = event.at
        elif since is not None and event.from_state == AllocationState.STOPPED:
            # Expiry leaves "stopped" when enforcement runs, at or after the paid period's end.
            spans.append((since, min(event.at, allocation.paid_until)))
            since = None
    if since is not None:
        spans.append((since, min(now, allocation.paid_until)))
    return spans


def time_left(*, allocation: Allocation, now: datetime) -> timedelta:
    return max(timedelta(0), allocation.paid_until - max(now, allocation.paid_from))


# `from` and `to` are Python keywords: the functional form.
Usage = TypedDict(
    "Usage",
    {
        "from": datetime,
        "to": datetime,
        "paid_hours": float,
        "hours_left": float,
        "stopped_hours": float,
        "running_hours": float,
        "gpu_hours": float,
        "covered_gpu_hours": float,
        "partial": bool,
        "busy_hours": float,
        "util_avg": float | None,
        "util_max": float | None,
        "mem_max_mib": float | None,
        "energy_kwh": float | None,
        "idle_hours": float | None,
        "idle_warning": bool,
        "edges_unsplit": bool,
    },
)


def allocation_usage(*, allocation: Allocation, now: datetime) -> Usage:
    """The whole paid window so far: paid, running and stopped hours, and what the GPUs did
    (busy GPU-hours, average and peak utilisation, peak memory, energy), from rollups where
    raw samples are gone and raw samples for the newest part. `covered_hours` says how much
    of the window telemetry saw: figures over less than the whole are partial."""
    start = allocation.paid_from
    end = min(now, allocation.paid_until)
    elapsed = max(timedelta(0), end - start)
    stopped = sum(((b - a) for a, b in stopped_spans(allocation=allocation, now=now)), timedelta(0))
    held = list(allocation.held.all())
    gpu_ids = [h.gpu_id for h in held]
    totals, unsplit = (
        _held_totals(held, start=start, end=end, now=now) if held and elapsed else (None, False)
    )
    idle_hours = None
    if totals is not None and allocation.state == AllocationState.RUNNING:
        last_busy = (
            GpuSample.objects.filter(
                gpu_id__in=gpu_ids, at__gte=start, utilization__gt=_active_threshold()
            )
            .order_by("-at")
            .values_list("at", flat=True)
            .first()
        )
        idle_hours = round((end - (last_busy or start)).total_seconds() / 3600, 1)
    # Each GPU for the time it was the allocation's (a replacement ends the old one's).
    gpu_hours = (
        sum(
            max(timedelta(0), min(end, h.ends_at) - max(start, h.starts_at)).total_seconds()
            for h in held
        )
        / 3600
    )
    covered = totals.covered_s / 3600 if totals else 0.0
    return {
        "from": start,
        "to": end,
        "paid_hours": round(elapsed.total_seconds() / 3600, 1),
        "hours_left": round(
            max(timedelta(0), allocation.paid_until - now).total_seconds() / 3600, 1
        ),
        "stopped_hours": round(stopped.total_seconds() / 3600, 1),
        "running_hours": round((elapsed - stopped).total_seconds() / 3600, 1),
        "gpu_hours": round(gpu_hours, 2),
        "covered_gpu_hours": round(covered, 2),
        "partial": bool(totals) and covered < gpu_hours * 0.95,
        "busy_hours": round(totals.busy_s / 3600, 2) if totals else 0.0,
        "util_avg": round(totals.util_avg, 1) if totals and totals.util_avg is not None else None,
        "util_max": totals.util_max if totals else None,
        "mem_max_mib": totals.memory_max_mib if totals else None,
        "energy_kwh": round(totals.energy_j / 3_600_000, 3)
        if totals and totals.energy_j is not None
        else None,
        "idle_hours": idle_hours,
        "idle_warning": idle_hours is not None and idle_hours >= 2,
        "edges_unsplit": unsplit,
    }


def allocation_series(
    *, allocation: Allocation, start: datetime | None = None, end: datetime | None = None
) -> dict[str, Any]:
    """The allocation's GPUs within its paid period (default: the last hour of it)."""
    now = timezone.now()
    end = min(end or now, allocation.paid_until, now)
    start = max(start or end - timedelta(hours=1), allocation.paid_from)
    held = list(allocation.held.all())
    series = gpu_series(gpus=[h.gpu for h in held], start=start, end=end)
    windows = {h.gpu.uuid: (h.starts_at, h.ends_at) for h in held}
    if any(h.starts_at > allocation.paid_from or h.ends_at < allocation.paid_until for h in held):
        for gpu in series["gpus"]:  # a swapped GPU's points only while it was this one's
            since, until = windows[gpu["uuid"]]
            gpu["points"] = [
                p for p in gpu["points"] if since <= datetime.fromisoformat(p["t"]) < until
            ]
    return series


def _pieces(a: datetime, b: datetime) -> list[tuple[datetime, datetime]]:
    """[a, b) as its partial first hour, its whole hours and its partial last hour."""
    edges = holding_edges(a, b)
    whole = (
        edges[0][1] if edges and edges[0][0] == a else a,
        edges[-1][0] if edges and edges[-1][1] == b else b,
    )
    return [*edges[:1], *([whole] if whole[0] < whole[1] else []), *edges[1:]]


def _held_totals(
    held: list[AllocationGpu], *, start: datetime, end: datetime, now: datetime
) -> tuple[Totals, bool]:
    """What the allocation's GPUs did, each within [start, end) and the time it held it, and
    whether an hour at an edge could not be split (its raw samples pruned, no edge kept: the
    figures leave that part out rather than guess). A holding's partial first and last
    hour come from its kept edges (`HoldingEdge`), the rest from telemetry: one read per
    distinct piece (one or three, unless GPUs were swapped)."""
    kept = {
        (edge.holding_id, edge.start, edge.end): edge
        for edge in HoldingEdge.objects.filter(holding__in=held)
    }
    total = Totals()
    pieces: dict[tuple[datetime, datetime], list[int]] = {}
    for h in held:
        a, b = max(start, h.starts_at), min(end, h.ends_at)
        if a >= b:
            continue
        for piece in _pieces(a, b):
            if edge := kept.get((h.pk, *piece)):
                total.add(
                    edge.samples, edge.util_sum, edge.util_samples, edge.util_max,
                    edge.mem_max_mib, edge.energy_j, edge.covered_s, edge.busy_s,
                )  # fmt: skip
            else:
                pieces.setdefault(piece, []).append(h.gpu_id)
    raw_from = raw_samples_from(now=now) if pieces else None
    unsplit = False
    for (a, b), ids in pieces.items():
        partial = hour_floor(a) != a or hour_floor(b) != b
        if partial and raw_from is not None and a < raw_from:
            # Raw samples no longer reach back here: GPU hours cannot split the hour.
            unsplit = True
            continue
        part = gpu_totals(start=a, end=b, gpu_ids=ids)
        total.add(
            part.samples, part.util_sum, part.util_samples, part.util_max, part.memory_max_mib,
            part.energy_j, part.covered_s, part.busy_s,
        )  # fmt: skip
    return total, unsplit
