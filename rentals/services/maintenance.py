"""Maintenance windows: the provider's own time on nodes or single GPUs, held like a booking.

A window is one holding per GPU under `rentals_allocationgpu_no_overlap`: no booking can
overlap it and it can overlap no booking, whichever commits first. The bookings already in
its way are never stranded: staff choose, for each, to move it (equivalent GPUs for the same
paid period and price: `rentals.services.swaps`) or to cancel it (a full refund, before its
start), and the window, the moves and the cancellations are one transaction. Each owner gets
a notice (in their language and time zone) and a webhook at once, and a window over bookings
starts at least MAINTENANCE_NOTICE_HOURS later, so they hear of it that long before.
"""

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, cast
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.roles import Operation, operator_require
from catalog.models import Gpu, Node, NodeState
from core.db import db_now, retried_transaction, savepoint
from core.errors import Conflict, Invalid
from rentals.errors import ChoiceMissing, NoSpare
from rentals.models import (
    LIVE_STATES,
    Allocation,
    AllocationGpu,
    AllocationState,
    EventKind,
    MaintenanceWindow,
    Notice,
    NoticeKind,
)
from rentals.selectors.holdings import holdings_overlapping
from rentals.services.allocations import members_cancel, members_locked
from rentals.services.events import raise_if_lost_race
from rentals.services.notices import notices_queue
from rentals.services.summary import holdings_changed
from rentals.services.swaps import gpus_swap, spare_find
from rentals.signals import allocation_notices_recorded

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

GRACE = timedelta(minutes=5)  # a start this little in the past means "now"
LONGEST = timedelta(days=30)
MAX_TARGETS = 256


class Choice(models.TextChoices):
    """What staff choose for a booking in a window's way."""

    MOVE = "move", gettext_lazy("move to equivalent GPUs")
    CANCEL = "cancel", gettext_lazy("cancel and refund in full")


@dataclass(frozen=True)
class Outcome:
    """What a window did to one booking in its way."""

    allocation: Allocation
    action: str  # Choice


@dataclass(frozen=True)
class WindowRequest:
    """A window request that passed its checks: its GPUs (their nodes locked) and times."""

    gpus: list[Gpu]
    starts_at: datetime
    ends_at: datetime
    reason: str


class WindowOutcome(TypedDict):
    """What `maintenance_create` gives back with its window."""

    outcome: list[Outcome]


def _targets(nodes: list[str] | None, gpus: list[str] | None, errors: dict[str, str]) -> list[Gpu]:
    """The GPUs of the named nodes and the named GPUs, their nodes' rows locked in id order
    (as bookings lock them), or field errors."""
    nodes, gpus = list(nodes or []), list(gpus or [])
    if not nodes and not gpus:
        errors["nodes"] = _("Name the nodes (hostnames) or GPUs (UUIDs) the window takes.")
        return []
    if len(nodes) + len(gpus) > MAX_TARGETS:
        errors["gpus"] = _("At most %(n)s nodes and GPUs in one window.") % {"n": MAX_TARGETS}
        return []
    by_name = {n.hostname: n for n in Node.objects.filter(hostname__in=nodes)}
    by_uuid = {g.uuid: g for g in Gpu.objects.filter(uuid__in=gpus).select_related("node")}
    unknown = [n for n in nodes if n not in by_name]
    if unknown:
        errors["nodes"] = _("Unknown node: %(names)s.") % {"names": ", ".join(unknown)}
    if missing := [g for g in gpus if g not in by_uuid]:
        errors["gpus"] = _("Unknown GPU: %(names)s.") % {"names": ", ".join(missing)}
    node_ids = {n.pk for n in by_name.values()} | {g.node_id for g in by_uuid.values()}
    locked = list(
        Node.objects.select_for_update(of=("self",)).filter(pk__in=node_ids).order_by("pk")
    )
    retired = sorted(n.hostname for n in locked if n.state == NodeState.RETIRED)
    if retired:
        errors["nodes"] = _("Retired nodes take no maintenance: %(names)s.") % {
            "names": ", ".join(retired)
        }
    chosen = {g.pk: g for g in Gpu.objects.filter(node__in=by_name.values()).select_related("node")}
    chosen.update({g.pk: g for g in by_uuid.values()})
    return sorted(chosen.values(), key=lambda g: (g.node.hostname, g.index))


def _times(
    starts_at: datetime, ends_at: datetime, now: datetime, errors: dict[str, str]
) -> tuple[datetime | None, datetime | None]:
    for field, at in (("starts_at", starts_at), ("ends_at", ends_at)):
        if not isinstance(at, datetime) or timezone.is_naive(at):
            errors[field] = _("Give the time with a time zone (UTC recommended).")
    if errors.keys() & {"starts_at", "ends_at"}:
        return None, None
    if ends_at <= starts_at:
        errors["ends_at"] = _("The end comes before the start.")
    elif ends_at <= now:
        errors["ends_at"] = _("The window is in the past.")
    elif starts_at < now - GRACE:
        errors["starts_at"] = _("The window starts in the past; start it now or later.")
    elif ends_at - max(starts_at, now) > LONGEST:
        errors["ends_at"] = _("A window is at most %(days)s days long.") % {"days": LONGEST.days}
    return max(starts_at, now), ends_at


def window_request_check(
    *,
    nodes: list[str] | None,
    gpus: list[str] | None,
    starts_at: datetime,
    ends_at: datetime,
    reason: str,
    now: datetime,
) -> WindowRequest:
    """The request's GPUs (their nodes locked) and times, or Invalid with every
    field's refusal at once."""
    errors: dict[str, str] = {}
    if not isinstance(reason, str) or not reason.strip() or len(reason) > 300:
        errors["reason"] = _("Say why, in at most 300 characters (the customers it moves read it).")
    starts, ends = _times(starts_at, ends_at, now, errors)
    targets = _targets(nodes, gpus, errors)
    if errors:
        raise Invalid(errors)
    assert starts is not None and ends is not None  # None only beside a field error
    return WindowRequest(gpus=targets, starts_at=starts, ends_at=ends, reason=reason.strip())


def in_the_way(
    *, gpu_ids: Collection[int], starts_at: datetime, ends_at: datetime, lock: bool = False
) -> list[Allocation]:
    """The live allocations holding any of these GPUs at some moment of the window (their
    rows locked in id order where `lock`)."""
    holding = holdings_overlapping(starts_at=starts_at, ends_at=ends_at).filter(
        gpu_id__in=gpu_ids, allocation__state__in=LIVE_STATES
    )
    found = Allocation.objects.filter(pk__in=holding.values("allocation_id"))
    if lock:
        found = found.select_for_update(of=("self",))
    return list(
        found.select_related("gpu_model", "node", "node__region", "cluster", "team", "user")
        .prefetch_related("held__gpu")
        .order_by("pk")
    )


def choices_allowed(allocation: Allocation, now: datetime) -> list[str]:
    """Move always; cancel only before the start (a full refund)."""
    started = allocation.state != AllocationState.SCHEDULED or allocation.paid_from <= now
    return [Choice.MOVE] if started else [Choice.MOVE, Choice.CANCEL]


def _affected(allocation: Allocation, gpu_ids: Collection[int], now: datetime) -> dict[str, Any]:
    return {
        "allocation": str(allocation.pk), "team": allocation.team_id,
        "owner": allocation.user.username, "state": allocation.state,
        "node": allocation.node.hostname,
        "gpus": [h.gpu.uuid for h in allocation.current_holdings if h.gpu_id in gpu_ids],
        "paid_from": allocation.paid_from.isoformat(),
        "paid_until": allocation.paid_until.isoformat(),
        "choices": [str(c) for c in choices_allowed(allocation, now)],
    }  # fmt: skip


def _choices(
    affected: list[dict[str, Any]] | None,
    in_way: list[Allocation],
    gpu_ids: Collection[int],
    now: datetime,
) -> dict[UUID, str]:
    """{allocation id: choice} for every allocation in the way, or the refusal naming those
    without one; a choice for an allocation that is not in the way is a field error."""
    chosen: dict[UUID, str] = {}
    for item in affected or []:
        try:
            chosen[UUID(str(item["allocation"]))] = Choice(item["action"])
        except (KeyError, TypeError, ValueError) as exc:
            raise Invalid(
                {"affected": _("Each choice is {allocation, action: move or cancel}.")}
            ) from exc
    in_way_ids = {a.pk for a in in_way}
    if stray := sorted(str(pk) for pk in chosen.keys() - in_way_ids):
        raise Invalid(
            {"affected": _("Not in this window's way: %(ids)s.") % {"ids": ", ".join(stray)}}
        )
    if missing := [a for a in in_way if a.pk not in chosen]:
        raise ChoiceMissing(
            _(
                "%(n)s allocations hold these GPUs during the window: choose, for each, to "
                "move it or (before its start) to cancel it."
            )
            % {"n": len(missing)},
            affected=[_affected(a, gpu_ids, now) for a in missing],
        )
    for allocation in in_way:
        if chosen[allocation.pk] not in choices_allowed(allocation, now):
            raise Conflict(
                _("Allocation %(id)s has started: it can be moved, not cancelled.")
                % {"id": allocation.pk}
            )
    return chosen


def _overlapping_window_check(
    gpu_ids: Collection[int], starts_at: datetime, ends_at: datetime
) -> None:
    clash = (
        holdings_overlapping(starts_at=starts_at, ends_at=ends_at)
        .filter(gpu_id__in=gpu_ids, maintenance__isnull=False)
        .select_related("gpu__node", "maintenance")
        .order_by("gpu__node__hostname", "gpu__index")
        .first()
    )
    if clash is not None:
        window = clash.maintenance
        assert window is not None  # found by maintenance__isnull=False
        raise Conflict(
            _("%(node)s #%(index)s is already in maintenance from %(from)s to %(until)s.")
            % {
                "node": clash.gpu.node.hostname,
                "index": clash.gpu.index,
                "from": window.starts_at.isoformat(),
                "until": window.ends_at.isoformat(),
            }  # fmt: skip
        )


def _lead_check(in_way: list[Allocation], starts_at: datetime, now: datetime) -> None:
    lead = settings.ANCHORGPU["MAINTENANCE_NOTICE"]
    if in_way and starts_at < now + lead:
        raise Invalid(
            {
                "starts_at": _(
                    "Bookings are in this window's way: it starts at least %(hours)s hours "
                    "from now, so their owners hear of it first."
                )
                % {"hours": f"{lead.total_seconds() / 3600:g}"}
            }
        )


@retried_transaction
def maintenance_create(
    *, operator: User, nodes: list[str] | None = None, gpus: list[str] | None = None,
    starts_at: datetime, ends_at: datetime, reason: str,
    affected: list[dict[str, Any]] | None = None, now: datetime | None = None,
) -> "WithAnnotations[MaintenanceWindow, WindowOutcome]":  # fmt: skip
    """Hold the named nodes' GPUs (and the named GPUs) for [starts_at, ends_at), moving or
    cancelling the bookings in the way as `affected` chooses ([{allocation, action}]).

    Refused with field errors for bad input (an end before the start, a window in the past,
    an unknown or retired node), as a conflict for an overlapping window, and as
    `ChoiceMissing` (naming them) while a booking in the way has no choice. The window comes
    back with `outcome`: what was done to each ([Outcome])."""
    operator_require(operator, Operation.MAINTAIN)
    now = now or db_now()
    request = window_request_check(
        nodes=nodes, gpus=gpus, starts_at=starts_at, ends_at=ends_at, reason=reason, now=now
    )
    gpu_ids = {g.pk for g in request.gpus}
    _overlapping_window_check(gpu_ids, request.starts_at, request.ends_at)
    in_way = in_the_way(
        gpu_ids=gpu_ids, starts_at=request.starts_at, ends_at=request.ends_at, lock=True
    )
    chosen = _choices(affected, in_way, gpu_ids, now)
    _lead_check(in_way, request.starts_at, now)
    window = MaintenanceWindow.objects.create(
        starts_at=request.starts_at, ends_at=request.ends_at, reason=request.reason,
        created_by=operator, created_at=now,
    )  # fmt: skip
    outcome = _clear_the_way(window, in_way, chosen, gpu_ids, operator=operator, now=now)
    try:
        with savepoint():
            AllocationGpu.objects.bulk_create(
                AllocationGpu(
                    maintenance=window, gpu=gpu, starts_at=window.starts_at,
                    ends_at=window.ends_at,
                )
                for gpu in request.gpus
            )  # fmt: skip
    except IntegrityError as exc:
        raise_if_lost_race(exc, Conflict(_("The GPUs were just booked; look again.")))
        raise
    node_ids = {g.node_id for g in request.gpus}
    holdings_changed(
        gpu_model_ids=Node.objects.filter(pk__in=node_ids)
        .values_list("gpu_model_id", flat=True)
        .distinct(),
        node_ids=node_ids,
    )
    _notices_record(window, outcome, now)
    done = cast("WithAnnotations[MaintenanceWindow, WindowOutcome]", window)
    done.outcome = outcome
    return done


def _clear_the_way(
    window: MaintenanceWindow,
    in_way: list[Allocation],
    chosen: dict[UUID, str],
    gpu_ids: Collection[int],
    *,
    operator: User,
    now: datetime,
) -> list[Outcome]:
    """Cancel what staff chose to cancel (a cluster: all its nodes), then move the rest off
    the window's GPUs."""
    outcome: list[Outcome] = []
    cancelled: set[UUID] = set()
    for allocation in in_way:
        if chosen[allocation.pk] != Choice.CANCEL or allocation.pk in cancelled:
            continue
        members = members_locked(allocation)
        members_cancel(members, actor=operator, now=now)
        cancelled |= {m.pk for m in members}
        outcome.append(Outcome(allocation, Choice.CANCEL))
    for allocation in in_way:
        if chosen[allocation.pk] != Choice.MOVE or allocation.pk in cancelled:
            continue
        drop = [h for h in allocation.current_holdings if h.gpu_id in gpu_ids]
        at = max(now, allocation.paid_from)
        refusal = NoSpare(
            _("No equivalent free GPUs to move allocation %(id)s to for its paid period.")
            % {"id": allocation.pk}
        )
        spare = spare_find(allocation, drop=drop, at=at, exclude=gpu_ids)
        if spare is None:
            raise refusal
        gpus_swap(
            allocation, drop=drop, spare=spare, at=at, now=now, kind=EventKind.MOVE,
            actor=operator, final=refusal,
        )  # fmt: skip
        outcome.append(Outcome(allocation, Choice.MOVE))
    return outcome


def _notices_record(window: MaintenanceWindow, outcome: list[Outcome], now: datetime) -> None:
    """A notice per allocation moved or cancelled (mailed after commit), and their webhooks
    (rentals.signals) in this transaction."""
    kinds: dict[str, str] = {
        Choice.MOVE: NoticeKind.MAINTENANCE_MOVED,
        Choice.CANCEL: NoticeKind.MAINTENANCE_CANCELLED,
    }
    notices = Notice.objects.bulk_create(
        Notice(
            user=done.allocation.user, allocation=done.allocation, kind=kinds[done.action],
            maintenance=window, ends_at=done.allocation.paid_until, created_at=now,
        )
        for done in outcome
    )  # fmt: skip
    if notices:
        allocation_notices_recorded.send(sender=Notice, notice_ids=[n.pk for n in notices])
    mailed = [n.pk for n, done in zip(notices, outcome, strict=True) if done.allocation.user.email]
    transaction.on_commit(lambda: notices_queue(mailed))
