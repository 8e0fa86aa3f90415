"""Placement: the node and the GPUs a booking takes, with the node row locked."""

from collections import defaultdict

from catalog.models import GpuModel, Node, NodeState
from rentals.availability import candidate_nodes, free_gpus


def _free_by_node(*, gpu_model, starts_at, ends_at, node_ids=None):
    gpus = free_gpus(gpu_model=gpu_model, starts_at=starts_at, ends_at=ends_at)
    if node_ids is not None:
        gpus = gpus.filter(node_id__in=node_ids)
    by_node = defaultdict(list)
    for gpu in gpus.only("id", "node_id", "index", "uuid"):
        by_node[gpu.node_id].append(gpu)
    return by_node


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
