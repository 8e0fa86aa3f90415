"""Where a request fits: which node and GPUs, and the earliest start when nothing fits now."""

from collections import defaultdict
from datetime import datetime, timedelta

from django.db.models import Count

from catalog.models import GpuModel, Node, NodeState
from catalog.selectors import free_gpus
from rentals.models import AllocationGpu

MAX_START_CANDIDATES = 500


def _free_by_node(*, gpu_model, starts_at, ends_at, node_ids=None):
    gpus = free_gpus(gpu_model=gpu_model, starts_at=starts_at, ends_at=ends_at)
    if node_ids is not None:
        gpus = gpus.filter(node_id__in=node_ids)
    by_node = defaultdict(list)
    for gpu in gpus.only("id", "node_id", "index", "uuid"):
        by_node[gpu.node_id].append(gpu)
    return by_node


def candidate_nodes(*, gpu_model: GpuModel, gpu_count: int, starts_at, ends_at) -> list[int]:
    """Nodes with room, fullest first: packing keeps whole nodes free for whole-node bookings.

    Counted in the database (one grouped query), so the cost does not grow with fleet size
    on the Python side.
    """
    return list(
        free_gpus(gpu_model=gpu_model, starts_at=starts_at, ends_at=ends_at)
        .order_by()
        .values("node_id")
        .annotate(free=Count("id"))
        .filter(free__gte=gpu_count)
        .order_by("free", "node_id")
        .values_list("node_id", flat=True)
    )


def place_locked(*, gpu_model: GpuModel, gpu_count: int, starts_at, ends_at):
    """(node, gpus) with the node row locked, or None. Call inside a transaction.

    The node lock serialises bookings per node; the exclusion constraint stays the guarantee.
    A node another booking holds right now is passed over (SKIP LOCKED) for the next one that
    fits, so concurrent bookings spread instead of queueing on the fullest node; only when
    every fitting node is busy do we wait for one.
    """
    candidates = candidate_nodes(
        gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at
    )
    busy = []
    for node_id in candidates:
        placed = _lock_and_take(node_id, gpu_model, gpu_count, starts_at, ends_at, skip_locked=True)
        if placed is _LOCKED:
            busy.append(node_id)
        elif placed is not None:
            return placed
    for node_id in busy:
        placed = _lock_and_take(node_id, gpu_model, gpu_count, starts_at, ends_at)
        if placed is not None:
            return placed
    return None


_LOCKED = object()


def _lock_and_take(node_id, gpu_model, gpu_count, starts_at, ends_at, *, skip_locked=False):
    node = (
        Node.objects.select_for_update(skip_locked=skip_locked)
        .filter(pk=node_id, state=NodeState.ACTIVE)
        .first()
    )
    if node is None:
        return _LOCKED if skip_locked else None
    gpus = _free_by_node(
        gpu_model=gpu_model, starts_at=starts_at, ends_at=ends_at, node_ids=[node_id]
    )[node_id]
    return (node, gpus[:gpu_count]) if len(gpus) >= gpu_count else None


def fits(*, gpu_model, gpu_count, starts_at, ends_at) -> bool:
    return bool(
        candidate_nodes(
            gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at
        )
    )


def earliest_start(
    *, gpu_model: GpuModel, gpu_count: int, duration: timedelta, not_before: datetime
) -> datetime | None:
    """The first instant ≥ not_before at which the request fits, or None if none is in sight.

    Capacity only frees up when a holding ends, so those instants are the only candidates.
    """
    ends = (
        AllocationGpu.objects.filter(
            gpu__node__gpu_model=gpu_model, released=False, ends_at__gt=not_before
        )
        .order_by("ends_at")
        .values_list("ends_at", flat=True)
        .distinct()[:MAX_START_CANDIDATES]
    )
    for candidate in [not_before, *ends]:
        if fits(
            gpu_model=gpu_model,
            gpu_count=gpu_count,
            starts_at=candidate,
            ends_at=candidate + duration,
        ):
            return candidate
    return None
