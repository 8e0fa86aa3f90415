"""GPU swaps: some of an allocation's GPUs exchanged for equivalent free ones, from an instant
to its paid_until, inside the caller's transaction and under the exclusion constraint. A
replacement (impaired GPUs) and a move for maintenance are both this.

The allocation keeps its id, paid period and price. Its old holdings end at the swap (or go,
when the swap is before they started), the new ones run to paid_until, and one event says
what moved. A swap to another node moves the whole allocation (an allocation is GPUs on one
node), and its access with it: the allocation leaves one node's desired state and joins the
other's, whose generations change by themselves (each is the digest of its contents).
"""

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, connection

from catalog.models import Gpu, Node, NodeHealth, NodeState
from core.db import savepoint
from core.errors import DomainError
from rentals.models import Allocation, AllocationEvent, AllocationGpu
from rentals.services.events import event_record, raise_if_lost_race
from rentals.services.summary import holdings_changed
from rentals.sql import faults as faults_sql
from telemetry.models import FlagKind

# A node in these states answers nothing: its GPUs are no spares.
NODE_DOWN = (NodeHealth.UNREACHABLE, NodeHealth.STALE, NodeHealth.MALFORMED)


class BrokenParams(TypedDict):
    broken_kinds: list[str]
    xid: str
    fatal_xids: list[int]


def broken_params() -> BrokenParams:
    """The parameters of `rentals.sql.faults.gpu_broken`: which open flags mean a GPU cannot work."""
    return {
        "broken_kinds": [FlagKind.GPU_MISSING, FlagKind.RAS],
        "xid": FlagKind.XID,
        "fatal_xids": list(settings.ANCHORGPU["FATAL_XIDS"]),
    }


@dataclass(frozen=True)
class Spare:
    """Where GPUs are taken over: a node (its row locked) and the GPUs on it; `whole` when the
    allocation moves there entirely (another node), else the GPUs join its own node's."""

    node: Node
    gpus: list[Gpu]
    whole: bool


def _spare_gpus(node_id: int, params: Mapping[str, Any]) -> list[Gpu]:
    return list(Gpu.objects.raw(faults_sql.SPARE_GPUS, {**params, "node": node_id}))


def _locked_node(node_id: int) -> Node | None:
    return (
        Node.objects.select_for_update(of=("self",))
        .select_related("region")
        .filter(pk=node_id, state=NodeState.ACTIVE)
        .first()
    )


def spare_find(
    allocation: Allocation,
    *,
    drop: list[AllocationGpu],
    at: datetime,
    exclude: Collection[int] = frozenset(),
) -> Spare | None:
    """Equivalent GPUs for `drop` (some of the allocation's current holdings) from `at` to
    paid_until, free for that time, working and not in `exclude` (a window's GPUs), never one
    the allocation held before: first on its own node when that answers (an allocation of a
    cluster holds its whole node, so it always moves), else a whole place on another node of
    its model and region (a cluster's: a whole node of its network group), fullest first.
    The chosen node's row is locked. Call inside a transaction."""
    starts = max(at, allocation.paid_from)
    node = allocation.node
    params: dict[str, Any] = {  # the query's parameters, as the cursor takes them
        **broken_params(),
        "starts_at": starts,
        "ends_at": allocation.paid_until,
        "exclude": sorted({*exclude, *(h.gpu_id for h in allocation.held.all())}),
    }
    up = node.state == NodeState.ACTIVE and node.health not in NODE_DOWN
    if not allocation.cluster_id and up and _locked_node(node.pk) is not None:
        gpus = _spare_gpus(node.pk, params)
        if len(gpus) >= len(drop):
            return Spare(node=node, gpus=gpus[: len(drop)], whole=False)
    group = allocation.cluster.network_group if allocation.cluster is not None else ""
    with connection.cursor() as cursor:
        cursor.execute(
            faults_sql.SPARE_NODES,
            {**params, "model": allocation.gpu_model_id, "active": NodeState.ACTIVE,
             "region": node.region_id, "not_nodes": [node.pk], "down": list(NODE_DOWN),
             "group": group, "count": allocation.gpu_count, "whole": bool(group)},
        )  # fmt: skip
        candidates = [node_id for (node_id,) in cursor.fetchall()]
    for node_id in candidates:
        other = _locked_node(node_id)
        if other is None:
            continue
        gpus = _spare_gpus(node_id, params)
        if len(gpus) >= allocation.gpu_count and (not group or len(gpus) == other.gpu_count):
            return Spare(node=other, gpus=gpus[: allocation.gpu_count], whole=True)
    return None


def _names(node_name: str, gpus: Iterable[Gpu], *, with_node: bool) -> str:
    indexes = ", ".join(f"#{g.index}" for g in sorted(gpus, key=lambda g: g.index))
    return f"{node_name} {indexes}" if with_node else indexes


def gpus_swap(
    allocation: Allocation, *, drop: list[AllocationGpu], spare: Spare, at: datetime,
    now: datetime, kind: str, actor: User | None = None, final: DomainError | None = None,
) -> AllocationEvent:  # fmt: skip
    """Swap at `at` (not before the paid period): the dropped holdings (all of them when it
    moves to another node) end there, the spare GPUs are held from there to paid_until, and
    an event (`kind`, at `now`) says what moved. A lost race on the constraint runs the
    caller's transaction again (`final` after the last try). Inside the caller's transaction,
    with the allocation's row locked."""
    starts = max(at, allocation.paid_from)
    current = allocation.current_holdings
    dropped = current if spare.whole else drop
    AllocationGpu.objects.filter(pk__in=[h.pk for h in dropped if h.starts_at < starts]).update(
        ends_at=starts
    )
    AllocationGpu.objects.filter(pk__in=[h.pk for h in dropped if h.starts_at >= starts]).delete()
    try:
        with savepoint():
            AllocationGpu.objects.bulk_create(
                AllocationGpu(
                    allocation=allocation, gpu=gpu, starts_at=starts,
                    ends_at=allocation.paid_until,
                )
                for gpu in spare.gpus
            )  # fmt: skip
    except IntegrityError as exc:
        raise_if_lost_race(exc, final)
        raise
    old_node = allocation.node
    if spare.whole:
        allocation.node = spare.node
        allocation.save(update_fields=["node"])
    holdings_changed(
        gpu_model_ids=[old_node.gpu_model_id, spare.node.gpu_model_id],
        node_ids=[old_node.pk, spare.node.pk, *(h.node_id for h in dropped)],
    )
    moved = spare.whole and spare.node.pk != old_node.pk
    before = _names(old_node.hostname, [h.gpu for h in dropped], with_node=moved)
    after = _names(spare.node.hostname, spare.gpus, with_node=moved)
    note = f"{before} → {after}"
    return event_record(allocation, kind=kind, actor=actor, note=note[:200], at=now)
