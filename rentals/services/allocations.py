"""The allocation life cycle after booking: stop, start, cancel (with refund) and extend.

The paid period is fixed at booking: stop and start change `state` only, and only an
extension moves `paid_until` (the database refuses anything else, see migration 0002).

A cluster's nodes were bought together and are sold back together: cancelling or extending
any of its allocations acts on all of them, in one transaction, or on none. Stop and start
act on one node (`cluster_stop`/`cluster_start` on every node).
"""

from datetime import datetime
from typing import NamedTuple

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Sum
from django.utils.translation import gettext as _

from accounts.errors import NotAllowed
from accounts.roles import Acting, Action
from catalog.models import Gpu, OptionBilling
from core.db import db_now, retried_transaction, savepoint
from core.errors import Conflict, Invalid
from rentals import limits
from rentals.errors import InvalidTransition, QuoteExpired, QuoteMissing, QuoteUsed
from rentals.models import (
    LIVE_STATES,
    Allocation,
    AllocationGpu,
    AllocationState,
    Cluster,
    EventKind,
    LedgerEntry,
    LedgerKind,
    LedgerReason,
    NoticeKind,
    Quote,
    QuoteKind,
)
from rentals.purchase_hooks import purchase_check
from rentals.selectors.holdings import holdings_overlapping
from rentals.selectors.quotes import quote_options
from rentals.services.events import (
    event_record,
    events_record,
    ledger_announce,
    raise_if_lost_race,
)
from rentals.services.notices import receipt_record
from rentals.services.quotes import quote_lines, quote_store
from rentals.services.spend import spend_limit_check
from rentals.services.summary import holdings_changed


def _locked(allocation: Allocation, acting: Acting) -> Allocation:
    """The allocation, row-locked, if the acting team owns it and the role may act."""
    acting.require(Action.ACT)
    locked = Allocation.objects.select_for_update().filter(pk=allocation.pk).first()
    if locked is None or locked.team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    return locked


class Transition(NamedTuple):
    """A change of state that stop or start makes, and the states it is made from."""

    kind: str  # EventKind
    to_state: str
    allowed: tuple[str, ...]


STOP = Transition(EventKind.STOP, AllocationState.STOPPED, (AllocationState.RUNNING,))
START = Transition(EventKind.START, AllocationState.RUNNING, (AllocationState.STOPPED,))


def _transition(
    allocation: Allocation, change: Transition, *, acting: Acting, now: datetime | None = None
) -> Allocation:
    """One allocation's state change, inside the caller's transaction."""
    now = now or db_now()
    allocation = _locked(allocation, acting)
    if allocation.paid_until <= now:
        raise InvalidTransition(_("The paid period has ended; the allocation has expired."))
    if allocation.state not in change.allowed:
        raise InvalidTransition(
            _("Cannot %(action)s an allocation that is %(state)s.")
            % {"action": change.kind, "state": allocation.get_state_display()}
        )
    from_state = allocation.state
    allocation.state = change.to_state
    allocation.save(update_fields=["state"])
    event_record(
        allocation,
        kind=change.kind,
        actor=acting.user,
        from_state=from_state,
        to_state=change.to_state,
        at=now,
    )
    return allocation


@transaction.atomic
def allocation_stop(
    *, acting: Acting, allocation: Allocation, now: datetime | None = None
) -> Allocation:
    """Stop the GPUs' work. The paid period runs on: stopped time is paid time."""
    return _transition(allocation, STOP, acting=acting, now=now)


@transaction.atomic
def allocation_start(
    *, acting: Acting, allocation: Allocation, now: datetime | None = None
) -> Allocation:
    return _transition(allocation, START, acting=acting, now=now)


@transaction.atomic
def allocation_cancel(
    *, acting: Acting, allocation: Allocation, now: datetime | None = None
) -> Allocation:
    """Cancel before the start, refunding every charge in full; after the start only stop.
    A cluster's allocation cancels the whole cluster."""
    now = now or db_now()
    members = _members_locked(allocation, acting)
    if any(m.state != AllocationState.SCHEDULED or m.paid_from <= now for m in members):
        raise InvalidTransition(
            _("Only a scheduled allocation can be cancelled before it starts; stop it instead.")
        )
    members_cancel(members, actor=acting.user, now=now)
    cancelled = next(m for m in members if m.pk == allocation.pk)
    # The receipt: the booker paid, the booker hears of the refund (mailed after commit).
    receipt_record(allocation=cancelled, quote=cancelled.quote, kind=NoticeKind.REFUNDED, at=now)
    return cancelled


def members_cancel(members: list[Allocation], *, actor: User | None, now: datetime) -> None:
    """Cancel these scheduled allocations (one, or a cluster's every node; their rows locked)
    and refund every charge in full, inside the caller's transaction: the owner's cancel
    and a maintenance window's alike."""
    Allocation.objects.filter(pk__in=[m.pk for m in members]).update(
        state=AllocationState.CANCELLED
    )
    held = AllocationGpu.objects.filter(allocation__in=members, released=False)
    nodes = {m.node_id for m in members} | set(held.values_list("node_id", flat=True).distinct())
    held.update(released=True)
    holdings_changed(gpu_model_ids=[m.gpu_model_id for m in members], node_ids=nodes)
    charged = (
        LedgerEntry.objects.filter(allocation__in=members, kind=LedgerKind.CHARGE)
        .values("allocation_id")
        .annotate(total=Sum("amount"), net=Sum("net"), vat=Sum("vat"))
    )
    refunds = LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=members[0].team,
            user=actor,
            allocation_id=row["allocation_id"],
            period_id=members[0].period_id,
            kind=LedgerKind.REFUND,
            amount=row["total"],
            net=row["net"],
            vat=row["vat"],
            currency=members[0].quote.currency,
            reason=LedgerReason.CANCELLATION,
            at=now,
        )
        for row in charged
    )
    for member in members:
        member.state = AllocationState.CANCELLED
    events_record(
        members,
        kind=EventKind.CANCEL,
        actor=actor,
        from_state=AllocationState.SCHEDULED,
        to_state=AllocationState.CANCELLED,
        at=now,
    )
    ledger_announce([refund.pk for refund in refunds])


def _period_count_check(period_count: int | None) -> None:
    if refusal := limits.period_count_refusal(period_count):
        raise Invalid({"period_count": refusal})


def _next_slot_taken(members: list[Allocation], until: datetime) -> list[Gpu]:
    """The members' GPUs that someone else holds between their paid_until and `until`."""
    return list(
        Gpu.objects.filter(held__allocation__in=members, held__ends_at=members[0].paid_until)
        .filter(
            Exists(
                holdings_overlapping(starts_at=members[0].paid_until, ends_at=until)
                .filter(gpu=OuterRef("pk"))
                .exclude(allocation__in=members)
            )
        )
        .select_related("node")
        .order_by("node__hostname", "index")
    )


def _refuse_if_taken(members: list[Allocation], until: datetime) -> None:
    if taken := _next_slot_taken(members, until):
        names = [
            f"{g.node.hostname}#{g.index}" if len(members) > 1 else f"#{g.index}" for g in taken
        ]
        raise Conflict(
            _("GPU %(gpus)s is booked by someone else right after your paid period.")
            % {"gpus": ", ".join(names)}
        )


def _members_locked(allocation: Allocation, acting: Acting) -> list[Allocation]:
    """`_members`, row-locked, if the acting team owns them and the role may act. A
    cluster's rows are locked in id order whichever node was asked, so two actions on one
    cluster queue instead of deadlocking."""
    acting.require(Action.ACT)
    cluster_id = (
        Allocation.objects.filter(pk=allocation.pk, team=acting.team)
        .values_list("cluster_id", flat=True)
        .first()
    )
    if cluster_id is None:
        return [_locked(allocation, acting)]
    return _members(Allocation(pk=allocation.pk, cluster_id=cluster_id), lock=True)


def members_locked(allocation: Allocation) -> list[Allocation]:
    """The allocation, or every allocation of its cluster, row-locked in id order, the one
    carrying the booking charge first: for operators, who act for no team."""
    return _members(allocation, lock=True)


def _members(allocation: Allocation, *, lock: bool = False) -> list[Allocation]:
    """The allocation, or every allocation of its cluster, the one carrying the booking
    charge first."""
    if allocation.cluster_id is None:
        return [allocation]
    rows = Allocation.objects.filter(cluster_id=allocation.cluster_id).order_by("id")
    members = list(rows.select_for_update() if lock else rows)
    lead_id = (
        LedgerEntry.objects.filter(allocation__in=members, reason=LedgerReason.BOOKING)
        .values_list("allocation_id", flat=True)
        .first()
    )
    return sorted(members, key=lambda member: member.pk != lead_id)


def _extendable_check(members: list[Allocation], now: datetime) -> None:
    if any(m.state not in LIVE_STATES or m.paid_until <= now for m in members):
        raise InvalidTransition(_("Only an allocation that has not ended can be extended."))


@transaction.atomic
def extension_quote_create(
    *, acting: Acting, allocation: Allocation, period_count: int, now: datetime | None = None
) -> Quote:
    """The price of adding `period_count` periods right after paid_until, on the same GPUs
    (a cluster's: on every node): the GPUs and the booking's per-period options at today's
    prices. A quote the customer reads before the extension charges exactly its total. An
    option without a current price is refused, never dropped."""
    acting.require(Action.BOOK)
    now = now or db_now()
    _period_count_check(period_count)
    if allocation.team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    members = _members(allocation)
    _extendable_check(members, now)
    lead = members[0]
    paid_from = lead.paid_until
    paid_until = paid_from + lead.period.duration * period_count
    _refuse_if_taken(members, paid_until)
    per_period = [
        (option, quantity)
        for option, quantity in quote_options(quote=lead.quote)
        if option.billing == OptionBilling.PER_PERIOD
    ]
    gpu_count = sum(m.gpu_count for m in members)
    lines, total = quote_lines(
        gpu_model=lead.gpu_model,
        gpu_count=gpu_count,
        period=lead.period,
        period_count=period_count,
        options=per_period,
        at=now,
    )
    return quote_store(
        Quote(
            team=acting.team,
            user=acting.user,
            kind=QuoteKind.EXTENSION,
            extends=lead,
            gpu_model=lead.gpu_model,
            gpu_count=gpu_count,
            node_count=len(members) if lead.cluster_id else None,
            period=lead.period,
            period_count=period_count,
            paid_from=paid_from,
            paid_until=paid_until,
            starts_now=False,
            vcpus_per_gpu=lead.vcpus_per_gpu,  # the same GPUs keep the share they were sold
            ram_gib_per_gpu=lead.ram_gib_per_gpu,
        ),
        lines=lines,
        total=total,
        now=now,
    )


@retried_transaction
def allocation_extend(
    *,
    acting: Acting,
    allocation: Allocation,
    quote: Quote | None = None,
    period_count: int | None = None,
    now: datetime | None = None,
    payment: object = None,
) -> Allocation:
    """Add an extension quote's periods right after paid_until on the same GPUs, if they are
    free, and charge exactly its total. Without a quote, one is made now (what the customer
    would have read at this moment) and charged. A cluster's allocation extends every node
    of the cluster, or none."""
    now = now or db_now()
    if quote is None:
        _period_count_check(period_count)
    members = _members_locked(allocation, acting)
    acting.require(Action.BOOK)  # an extension is a purchase
    _extendable_check(members, now)
    if quote is None:
        assert period_count is not None  # refused above
        quote = extension_quote_create(
            acting=acting, allocation=members[0], period_count=period_count, now=now
        )
    quote = _extension_quote_locked(acting, members, quote, now)
    _refuse_if_taken(members, quote.paid_until)
    spend_limit_check(team=acting.team, amount=quote.total, currency=quote.currency, at=now)
    purchase_check(acting=acting, quote=quote, payment=payment, at=now)
    _extension_write(acting, members, quote, now)
    return next(m for m in members if m.pk == allocation.pk)


def _extension_quote_locked(
    acting: Acting, members: list[Allocation], quote: Quote, now: datetime
) -> Quote:
    """The extension quote of these allocations, row-locked, if it can still be charged:
    unused, valid, and starting where their paid period ends now."""
    locked = (
        Quote.objects.select_for_update()
        .filter(pk=quote.pk, kind=QuoteKind.EXTENSION, extends=members[0], team=acting.team)
        .first()
    )
    if locked is None:
        raise QuoteMissing(_("No such extension quote for this allocation."), field="quote")
    if locked.used_at is not None:
        raise QuoteUsed(_("This extension quote was already used; request a new one."))
    if locked.valid_until <= now or any(m.paid_until != locked.paid_from for m in members):
        raise QuoteExpired(
            _("The extension quote expired or the allocation changed; request a new one."),
            field="quote",
        )
    return locked


def _extension_write(
    acting: Acting, members: list[Allocation], quote: Quote, now: datetime
) -> None:
    """Move every member's paid_until to the quote's, charge its total once (on the lead),
    and record the events and the receipt; `members` are updated in place."""
    lead = members[0]
    old_until, new_until = lead.paid_until, quote.paid_until
    try:
        with savepoint():
            # One statement for every node: the exclusion constraint takes all or none. Only
            # the GPUs they hold now (a replacement ended the others at its swap).
            AllocationGpu.objects.filter(allocation__in=members, ends_at=old_until).update(
                ends_at=new_until
            )
    except IntegrityError as exc:
        raise_if_lost_race(exc)
        raise
    # the GPUs they hold now are on their nodes now (a swap moves the allocation with them)
    holdings_changed(gpu_model_ids=[lead.gpu_model_id], node_ids=[m.node_id for m in members])
    Allocation.objects.filter(pk__in=[m.pk for m in members]).update(
        paid_until=new_until, warned_24h_at=None, warned_1h_at=None
    )
    Quote.objects.filter(pk=quote.pk).update(used_at=now)
    charge = LedgerEntry.objects.create(
        team=lead.team,
        user=acting.user,
        allocation=lead,
        period_id=lead.period_id,
        kind=LedgerKind.CHARGE,
        amount=quote.total,
        net=quote.net_total,
        vat=quote.vat_total,
        currency=quote.currency,
        quote=quote,
        reason=LedgerReason.EXTENSION,
        period_count=quote.period_count,
        at=now,
    )
    for member in members:
        member.paid_until = new_until
        member.warned_24h_at = member.warned_1h_at = None
    events_record(
        members,
        kind=EventKind.EXTEND,
        actor=acting.user,
        note=f"{old_until:%Y-%m-%d %H:%M} → {new_until:%Y-%m-%d %H:%M} UTC",
        at=now,
    )
    receipt_record(allocation=lead, quote=quote, kind=NoticeKind.EXTENDED, at=now)
    ledger_announce([charge.pk], charges_only=True)


def _cluster_first(cluster: Cluster) -> Allocation:
    first = Allocation.objects.filter(cluster=cluster).order_by("id").first()
    if first is None:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    return first


def _cluster_transition(
    cluster: Cluster,
    change: Transition,
    *,
    acting: Acting,
    refusal: str,
    now: datetime | None = None,
) -> list[Allocation]:
    """Every node of the cluster that can make the change, inside the caller's transaction."""
    now = now or db_now()
    members = _members_locked(_cluster_first(cluster), acting)
    movable = [m for m in members if m.state in change.allowed and m.paid_until > now]
    if not movable:
        raise InvalidTransition(refusal)
    return [_transition(m, change, acting=acting, now=now) for m in movable]


@transaction.atomic
def cluster_stop(
    *, acting: Acting, cluster: Cluster, now: datetime | None = None
) -> list[Allocation]:
    """Stop every running node of the cluster (the paid period runs on)."""
    refusal = _("No node of the cluster is running.")
    return _cluster_transition(cluster, STOP, acting=acting, refusal=refusal, now=now)


@transaction.atomic
def cluster_start(
    *, acting: Acting, cluster: Cluster, now: datetime | None = None
) -> list[Allocation]:
    """Start every stopped node of the cluster."""
    refusal = _("No node of the cluster is stopped.")
    return _cluster_transition(cluster, START, acting=acting, refusal=refusal, now=now)


@transaction.atomic
def cluster_cancel(*, acting: Acting, cluster: Cluster, now: datetime | None = None) -> Allocation:
    """Cancel the whole cluster before its start, refunding it in full (as cancelling any of
    its allocations does)."""
    return allocation_cancel(acting=acting, allocation=_cluster_first(cluster), now=now)
