"""Placement: the node and the GPUs a booking takes, with the node row locked."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TypedDict, cast

from django.db import connection, transaction

from catalog.models import Gpu, GpuModel, Node, NodeState, Region
from catalog.software import NO_REQUIRES, Requires
from rentals.selectors.availability import candidate_nodes
from rentals.selectors.summary import capacity_nodes_fullest
from rentals.sql import capacity as capacity_sql

if TYPE_CHECKING:
    from django.db.models.query import RawQuerySet
    from django_stubs_ext import WithAnnotations

# A booking's place on one node: the node (its row locked) and the GPUs it takes there.
Placed = tuple[Node, list[Gpu]]


class RegionColumns(TypedDict):
    """The region's columns that `capacity_sql.PLACE` returns beside each node's."""

    region_slug: str
    region_name_en: str
    region_name_pl: str


class _Locked(Enum):
    """A node another booking holds right now (passed over with SKIP LOCKED)."""

    LOCKED = "locked"


def _free_by_node(
    *, starts_at: datetime, ends_at: datetime, node_ids: Iterable[int]
) -> defaultdict[int, list[Gpu]]:
    by_node: defaultdict[int, list[Gpu]] = defaultdict(list)
    params = {"nodes": list(node_ids), "starts_at": starts_at, "ends_at": ends_at}
    for gpu in Gpu.objects.raw(capacity_sql.FREE_ON_NODES, params):
        by_node[gpu.node_id].append(gpu)
    return by_node


def place_locked(
    *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> Placed | None:  # fmt: skip
    """(node, gpus) with the node row locked, or None: on a node of `region_id` where given
    (a quote for a region), else of any region, whose software stack meets `requires` (the
    quote's minimum versions; checked again under the row lock). Call inside a transaction.

    Bounded first: where the capacity read model is fresh, at most PLACEMENT_CANDIDATES of
    the nodes it names (fullest first) are checked exactly, each locked (SKIP LOCKED), so
    the read does not grow with the fleet. Only when none of them fits (or the summary is
    stale or missing, or `requires` asks for a software stack, which the summary does not
    keep) are all the model's nodes read: one statement finds the fullest node with room
    that no other booking holds right now and locks it (SKIP LOCKED: concurrent bookings
    spread instead of queueing on one node). Either way the node's free GPUs are then read
    in a snapshot taken after the lock, so a booking that held the node just before is seen
    (the exclusion constraint stays the guarantee). Only when every node with room is held
    by another booking do we wait for one.
    """
    params: dict[str, Any] = {
        "model": gpu_model.pk, "active": NodeState.ACTIVE, "count": gpu_count,
        "starts_at": starts_at, "ends_at": ends_at, "region": region_id, **requires.params(),
    }  # fmt: skip
    if not requires:
        candidates = capacity_nodes_fullest(
            gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at,
            region_id=region_id,
        )  # fmt: skip
        if candidates:
            placed = _place_among(candidates, params)
            if placed is not None:
                return placed
    for node in _fullest_unheld(capacity_sql.PLACE, params):
        gpus = _free_by_node(starts_at=starts_at, ends_at=ends_at, node_ids=[node.pk])[node.pk]
        if len(gpus) >= gpu_count:
            return node, gpus[:gpu_count]
    return _place_waiting(
        gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at,
        region_id=region_id, requires=requires,
    )  # fmt: skip


def _fullest_unheld(statement: str, params: dict[str, Any]) -> list[Node]:
    """`capacity_sql.PLACE`'s (or PLACE_AMONG's) node, its row locked and its region set: at
    most one."""
    rows = cast(
        "RawQuerySet[WithAnnotations[Node, RegionColumns]]", Node.objects.raw(statement, params)
    )
    nodes: list[Node] = []
    for node in rows:
        node.region = Region.from_db(
            connection.alias,
            ["id", "slug", "name_en", "name_pl"],
            [node.region_id, node.region_slug, node.region_name_en, node.region_name_pl],
        )
        nodes.append(node)
    return nodes


def _place_among(candidates: list[int], params: dict[str, Any]) -> Placed | None:
    """The fullest of `candidates` with room for the window, exactly as the holdings stand,
    that no other booking holds right now, locked; then its free GPUs read after the lock.
    A node that a booking committed on in between (too few free after all) is struck off
    and the rest asked again. None: none of them fits, or all that do are held."""
    left = list(candidates)
    while left:
        found = _fullest_unheld(capacity_sql.PLACE_AMONG, {**params, "candidates": left})
        if not found:
            return None
        node = found[0]
        gpus = _free_by_node(
            starts_at=params["starts_at"], ends_at=params["ends_at"], node_ids=[node.pk]
        )[node.pk]
        if len(gpus) >= params["count"]:
            return node, gpus[: params["count"]]
        left.remove(node.pk)
    return None


def _place_waiting(
    *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None, requires: Requires,
) -> Placed | None:  # fmt: skip
    """Node by node, fullest first, waiting for a node another booking holds."""
    candidates = candidate_nodes(
        gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at,
        region_id=region_id, requires=requires,
    )  # fmt: skip
    busy: list[int] = []
    for node_id in candidates:
        placed = _lock_and_take(
            node_id, gpu_count, starts_at, ends_at, skip_locked=True, requires=requires
        )
        if placed is _Locked.LOCKED:
            busy.append(node_id)
        elif placed is not None:
            return placed
    for node_id in busy:
        placed = _lock_and_take(node_id, gpu_count, starts_at, ends_at, requires=requires)
        if placed is not None and placed is not _Locked.LOCKED:  # waited: never passed over
            return placed
    return None


def _lock_and_take(
    node_id: int, gpu_count: int, starts_at: datetime, ends_at: datetime, *,
    skip_locked: bool = False, requires: Requires = NO_REQUIRES,
) -> Placed | _Locked | None:  # fmt: skip
    node = (
        Node.objects.select_for_update(skip_locked=skip_locked, of=("self",))
        .select_related("region")
        .filter(pk=node_id, state=NodeState.ACTIVE)
        .first()
    )
    if node is None:
        return _Locked.LOCKED if skip_locked else None
    if not requires.met_by(
        driver=node.driver_version, cuda=node.cuda_version, rocm=node.rocm_version
    ):  # its stack changed since it was a candidate: read again under the lock
        return None
    gpus = _free_by_node(starts_at=starts_at, ends_at=ends_at, node_ids=[node_id])[node_id]
    return (node, gpus[:gpu_count]) if len(gpus) >= gpu_count else None


def _take_nodes(
    nodes: list[tuple[int, int]], node_count: int, starts_at: datetime, ends_at: datetime,
    skip_locked: bool, requires: Requires = NO_REQUIRES,
) -> list[Placed]:  # fmt: skip
    """`node_count` of `nodes` locked and free, or [] with none of them held: a savepoint
    rolled back lets go of the row locks taken since. Waiting (not `skip_locked`) goes in
    id order holding nothing else of the group, so two waiting bookings cannot deadlock."""
    savepoint = transaction.savepoint()
    taken: list[Placed] = []
    for node_id, gpus in nodes:
        placed = _lock_and_take(
            node_id, gpus, starts_at, ends_at, skip_locked=skip_locked, requires=requires
        )
        if placed is not None and placed is not _Locked.LOCKED:
            taken.append(placed)
            if len(taken) == node_count:
                transaction.savepoint_commit(savepoint)
                return taken
    transaction.savepoint_rollback(savepoint)
    return []


def place_cluster_locked(
    *, gpu_model: GpuModel, node_count: int, gpus_per_node: int, starts_at: datetime,
    ends_at: datetime, region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> tuple[str, list[Placed]] | None:  # fmt: skip
    """(network group, [(node, its GPUs)]) for `node_count` whole nodes of `gpus_per_node`
    GPUs in one group (of `region_id` where given), every node row locked, or None. Call
    inside a transaction.

    The group with the fewest free whole nodes that still fit goes first (least
    fragmentation: big groups stay whole for big clusters). Nodes another booking holds
    right now are passed over (SKIP LOCKED) so concurrent clusters take disjoint nodes; only
    when a group cannot be completed that way do we let go of what we took and wait for
    its nodes in id order (`_take_nodes`).
    """
    with connection.cursor() as cursor:
        cursor.execute(
            capacity_sql.WHOLE_FREE_GROUPS,
            {"model": gpu_model.pk, "active": NodeState.ACTIVE, "nodes": node_count,
             "per_node": gpus_per_node, "starts_at": starts_at, "ends_at": ends_at,
             "region": region_id, **requires.params()},
        )  # fmt: skip
        groups = cursor.fetchall()
    for group, node_ids, node_gpus in groups:
        nodes = list(zip(node_ids, node_gpus, strict=True))  # in id order
        for skip_locked in (True, False):
            taken = _take_nodes(nodes, node_count, starts_at, ends_at, skip_locked, requires)
            if taken:
                return group, taken
    return None
