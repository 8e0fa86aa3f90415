"""Impaired allocations: held GPUs that cannot work, by the provider's fault.

The mark is `Allocation.impaired_since` with its spans (`ImpairedSpan`), set and cleared by
`allocations_impairment_sync`, which runs after each poll's flags (anchorgpu/schedule.py) and
reads one rule (`rentals.sql.faults.IMPAIRED_NOW`: a fatal XID, AMD's RAS errors, a GPU gone from
its exporter, or its node silent longer than IMPAIRED_NODE_AFTER). It is a mark, not a
state: the paid period never moves. Owners get a notice and the webhooks
`allocation.impaired` / `allocation.recovered` (from the events, in the same transaction).

The remedy here is a replacement (`allocation_replace`): the impaired GPUs swapped for
equivalent free ones for the rest of the paid period (`rentals.services.swaps`), by staff or,
with IMPAIRED_AUTO_REPLACE, by the sync itself when a spare exists. Credits:
`rentals.services.credits`.
"""

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import NotRequired, TypedDict
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.utils.translation import gettext as _

from accounts.roles import Operation, operator_require
from catalog.models import Node, NodeHealth, NodeState
from core.db import db_now, retried_transaction
from rentals.errors import NoSpare, NotImpaired
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationState,
    EventKind,
    ImpairedSpan,
    Notice,
    NoticeKind,
)
from rentals.services.events import event_record, events_announce
from rentals.services.notices import notices_queue
from rentals.services.swaps import broken_params, gpus_swap, spare_find
from rentals.sql import faults as faults_sql
from telemetry.poll import stale_window

STARTED = (AllocationState.RUNNING, AllocationState.STOPPED)
TICK = timedelta(microseconds=1)


class SyncResult(TypedDict):
    """What a sync did: allocation ids."""

    impaired: list[UUID]
    recovered: list[UUID]
    still: list[UUID]
    replaced: NotRequired[list[UUID]]  # by allocations_impairment_sync, after the marks


def impaired_now(
    *, now: datetime, only: UUID | None = None, nodes: list[int] | None = None
) -> dict[UUID, tuple[list[int], bool]]:
    """{allocation id: (its impaired GPUs' ids, whether its node is the cause)} now, on
    `nodes` (ids; None: every node)."""
    params = {
        **broken_params(), "now": now, "only": only, "nodes": nodes, "started": list(STARTED),
        "down": [NodeHealth.UNREACHABLE, NodeHealth.STALE],
        "cutoff": now - settings.ANCHORGPU["IMPAIRED_NODE_AFTER"],
        "watched": watched_after(now),
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(faults_sql.IMPAIRED_NOW, params)
        return {row[0]: (list(row[1]), bool(row[2])) for row in cursor.fetchall()}


def watched_after(now: datetime) -> datetime:
    """A node polled since this instant is being watched; one that is not, is unknown."""
    return now - stale_window()


def _unwatched(node: Node, now: datetime) -> bool:
    return node.last_poll_at is None or node.last_poll_at < watched_after(now)


def _gpu_names(allocation: Allocation, gpu_ids: Iterable[int]) -> str:
    held = {h.gpu_id: h.gpu for h in allocation.held.all()}
    names = sorted(f"#{held[g].index}" for g in gpu_ids if g in held)
    return f"{allocation.node.hostname} {', '.join(names)}"


def _span_close(allocation: Allocation, *, now: datetime) -> ImpairedSpan | None:
    """End the open span (at least a tick long) and clear the mark; the span it ended."""
    span: ImpairedSpan | None = ImpairedSpan.objects.filter(  # the manager's rows read as Any
        allocation=allocation, ended_at__isnull=True
    ).first()
    allocation.impaired_since = None
    allocation.save(update_fields=["impaired_since"])
    if span is None:
        return None
    span.ended_at = max(now, span.started_at + TICK)
    span.save(update_fields=["ended_at"])
    return span


def _recovered_notice(allocation: Allocation, span: ImpairedSpan, now: datetime) -> Notice:
    """The all-clear, as the impairment had its notice (and its webhook, from the event)."""
    return Notice(
        user=allocation.user, allocation=allocation, kind=NoticeKind.RECOVERED,
        impaired_span=span, ends_at=allocation.paid_until, created_at=now,
    )  # fmt: skip


@retried_transaction
def _sync(now: datetime, nodes: list[int] | None) -> SyncResult:
    marked_now = Allocation.objects.filter(impaired_since__isnull=False)
    if nodes is not None:
        marked_now = marked_now.filter(node_id__in=nodes)
    marked = set(marked_now.values_list("pk", flat=True))
    candidates = set(impaired_now(now=now, nodes=nodes)) | marked
    if not candidates:
        return {"impaired": [], "recovered": [], "still": []}
    # Rows a booking, a stop or a replacement holds are left for the next sync.
    locked = list(
        Allocation.objects.select_for_update(of=("self",), skip_locked=True)
        .filter(pk__in=candidates)
        .select_related("user", "node", "gpu_model")
        .prefetch_related("held__gpu")
        .order_by("pk")
    )
    found = impaired_now(now=now, nodes=nodes)  # again, under the locks: what a replacement left
    spans = {
        s.allocation_id: s
        for s in ImpairedSpan.objects.filter(
            allocation__in=[a.pk for a in locked], ended_at__isnull=True
        )
    }
    events: list[AllocationEvent] = []
    notices: list[Notice] = []
    done: SyncResult = {"impaired": [], "recovered": [], "still": []}
    for allocation in locked:
        gpus, node_down = found.get(allocation.pk, ([], False))
        span = spans.get(allocation.pk)
        if gpus and span is None:
            span = ImpairedSpan.objects.create(
                allocation=allocation, started_at=now, gpus=gpus,
                cause="node" if node_down else "gpu",
            )  # fmt: skip
            allocation.impaired_since = now
            allocation.save(update_fields=["impaired_since"])
            events.append(
                AllocationEvent(
                    allocation=allocation, at=now, kind=EventKind.IMPAIRED,
                    note=_gpu_names(allocation, gpus)[:200],
                )
            )  # fmt: skip
            notices.append(
                Notice(
                    user=allocation.user, allocation=allocation, kind=NoticeKind.IMPAIRED,
                    impaired_span=span, ends_at=allocation.paid_until, created_at=now,
                )
            )  # fmt: skip
            done["impaired"].append(allocation.pk)
        elif gpus and span is not None:  # (always one here: the branch above made it)
            if set(gpus) - set(span.gpus):
                span.gpus = sorted({*span.gpus, *gpus})
                span.save(update_fields=["gpus"])
            if allocation.impaired_since is None:  # a span without its mark: set it again
                allocation.impaired_since = span.started_at
                allocation.save(update_fields=["impaired_since"])
            done["still"].append(allocation.pk)
        elif allocation.state not in STARTED or allocation.paid_until <= now:
            # Ended (expired) while impaired: the span ends with the paid period, quietly.
            _span_close(allocation, now=min(now, allocation.paid_until))
        elif span is not None and span.cause == "node" and _unwatched(allocation.node, now):
            # Marked for its node, and nobody polls the node now (the console stopped or is
            # starting again): unknown, not recovered. The mark stays until a poll tells.
            done["still"].append(allocation.pk)
        elif allocation.impaired_since is not None or span is not None:
            if (closed := _span_close(allocation, now=now)) is not None:
                events.append(
                    AllocationEvent(allocation=allocation, at=now, kind=EventKind.RECOVERED)
                )
                notices.append(_recovered_notice(allocation, closed, now))
            done["recovered"].append(allocation.pk)
    if events:
        events_announce(AllocationEvent.objects.bulk_create(events))
    if notices:
        created = Notice.objects.bulk_create(notices)
        mailed = [n.pk for n in created if n.user.email]
        transaction.on_commit(lambda: notices_queue(mailed))
    return done


def allocations_impairment_sync(
    *, now: datetime | None = None, nodes: list[int] | None = None
) -> SyncResult:
    """Mark the allocations whose held GPUs cannot work now, clear those whose GPUs work
    again, and (IMPAIRED_AUTO_REPLACE) replace the marked ones where a spare exists; on
    `nodes` only (ids: a shard, `impairment_shards`), or on every node.
    Returns {"impaired", "recovered", "still", "replaced"}: allocation ids."""
    now = now or db_now()
    done = _sync(now, nodes)
    done["replaced"] = []
    if settings.ANCHORGPU["IMPAIRED_AUTO_REPLACE"]:
        for pk in [*done["impaired"], *done["still"]]:
            try:
                _replace_in_transaction(pk, actor=None, now=now)
            except (NoSpare, NotImpaired):
                continue  # staff see it on the impaired page; the next sync tries again
            done["replaced"].append(pk)
    return done


def impairment_shards() -> list[list[int]]:
    """The node ids a sync covers, in shards of POLL_SHARD_SIZE as polling is sharded: the
    active nodes, and any other node an allocation is still marked impaired on (its mark is
    cleared by its shard's sync)."""
    ids = sorted(
        {
            *Node.objects.filter(state=NodeState.ACTIVE).values_list("pk", flat=True),
            *Allocation.objects.filter(impaired_since__isnull=False).values_list(
                "node_id", flat=True
            ),
        }
    )
    size = settings.ANCHORGPU["POLL_SHARD_SIZE"]
    return [ids[start : start + size] for start in range(0, len(ids), size)]


def _replace(allocation_id: UUID, *, actor: User | None, now: datetime) -> Allocation:
    allocation = (
        Allocation.objects.select_for_update(of=("self",))
        .select_related("node__region", "cluster", "gpu_model", "user")
        .prefetch_related("held__gpu")
        .filter(pk=allocation_id)
        .first()
    )
    if allocation is None or allocation.impaired_since is None:
        raise NotImpaired(
            _("Allocation %(id)s is not impaired: its GPUs work, there is nothing to replace.")
            % {"id": allocation_id}
        )
    gpus, _node_down = impaired_now(now=now, only=allocation.pk).get(allocation.pk, ([], False))
    if allocation.state not in STARTED or allocation.paid_until <= now or not gpus:
        raise NotImpaired(
            _(
                "Allocation %(id)s has no held GPU that cannot work now (it recovered or its "
                "paid period is over): there is nothing to replace."
            )
            % {"id": allocation.pk}
        )
    drop = [h for h in allocation.current_holdings if h.gpu_id in set(gpus)]
    refusal = NoSpare(
        _(
            "No equivalent free GPUs to replace allocation %(id)s's impaired GPUs for the rest "
            "of its paid period. Credit the impaired time instead, or try again later."
        )
        % {"id": allocation.pk}
    )
    spare = spare_find(allocation, drop=drop, at=now)
    if spare is None:
        raise refusal
    gpus_swap(
        allocation, drop=drop, spare=spare, at=now, now=now, kind=EventKind.REPLACE,
        actor=actor, final=refusal,
    )  # fmt: skip
    # The spare GPUs work (spare_find takes no broken one): the span ends at the swap.
    closed = _span_close(allocation, now=now)
    if closed is not None:
        event_record(allocation, kind=EventKind.RECOVERED, actor=actor, at=now)
        notice = _recovered_notice(allocation, closed, now)
        notice.save()
        if allocation.user.email:
            transaction.on_commit(lambda: notices_queue([notice.pk]))
    return allocation


@retried_transaction
def _replace_in_transaction(
    allocation_id: UUID, *, actor: User | None, now: datetime
) -> Allocation:
    return _replace(allocation_id, actor=actor, now=now)


def allocation_replace(
    *, operator: User, allocation_id: UUID, now: datetime | None = None
) -> Allocation:
    """Swap an impaired allocation's GPUs that cannot work (its whole node, for a node that
    is down or a cluster member) for equivalent free ones from now to paid_until, in one
    transaction under the exclusion constraint; the same id, paid period and price. Refused
    (`NoSpare`, 409) when no spare exists, `NotImpaired` when nothing is impaired."""
    operator_require(operator, Operation.REPLACE)
    return _replace_in_transaction(allocation_id, actor=operator, now=now or db_now())
