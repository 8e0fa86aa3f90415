"""The allocation life cycle after booking: stop, start, cancel (with refund) and extend.

The paid period is fixed at booking: stop and start change `state` only, and only an
extension moves `paid_until` (the database refuses anything else, see migration 0002).
"""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils.translation import gettext as _

from accounts.access import Acting, Action, NotAllowed
from catalog.models import OptionBilling
from core.db import db_now, retried_transaction
from core.errors import Conflict
from rentals import limits
from rentals.errors import InvalidTransition, QuoteExpired, QuoteMissing, QuoteUsed
from rentals.models import (
    LIVE_STATES,
    Allocation,
    AllocationGpu,
    AllocationState,
    EventKind,
    LedgerEntry,
    LedgerKind,
    LedgerReason,
    NoticeKind,
    Quote,
    QuoteKind,
)
from rentals.selectors import quote_options
from rentals.services.events import event_record, raise_if_lost_race
from rentals.services.notices import receipt_record
from rentals.services.quotes import quote_lines, quote_store
from rentals.services.spend import spend_limit_check


def _locked(allocation, acting: Acting) -> Allocation:
    """The allocation, row-locked, if the acting team owns it and the role may act."""
    acting.require(Action.ACT)
    locked = Allocation.objects.select_for_update().filter(pk=allocation.pk).first()
    if locked is None or locked.team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    return locked


def _transition(allocation, *, acting, to_state, allowed, kind, now=None):
    now = now or db_now()
    with transaction.atomic():
        allocation = _locked(allocation, acting)
        if allocation.paid_until <= now:
            raise InvalidTransition(_("The paid period has ended; the allocation has expired."))
        if allocation.state not in allowed:
            raise InvalidTransition(
                _("Cannot %(action)s an allocation that is %(state)s.")
                % {"action": kind, "state": allocation.get_state_display()}
            )
        from_state = allocation.state
        allocation.state = to_state
        allocation.save(update_fields=["state"])
        event_record(
            allocation,
            kind=kind,
            actor=acting.user,
            from_state=from_state,
            to_state=to_state,
            at=now,
        )
    return allocation


def allocation_stop(*, acting: Acting, allocation: Allocation, now=None) -> Allocation:
    """Stop the GPUs' work. The paid period runs on: stopped time is paid time."""
    return _transition(
        allocation,
        acting=acting,
        to_state=AllocationState.STOPPED,
        allowed=[AllocationState.RUNNING],
        kind=EventKind.STOP,
        now=now,
    )


def allocation_start(*, acting: Acting, allocation: Allocation, now=None) -> Allocation:
    return _transition(
        allocation,
        acting=acting,
        to_state=AllocationState.RUNNING,
        allowed=[AllocationState.STOPPED],
        kind=EventKind.START,
        now=now,
    )


@transaction.atomic
def allocation_cancel(*, acting: Acting, allocation: Allocation, now=None) -> Allocation:
    """Cancel before the start, refunding every charge in full; after the start only stop."""
    now = now or db_now()
    allocation = _locked(allocation, acting)
    if allocation.state != AllocationState.SCHEDULED or allocation.paid_from <= now:
        raise InvalidTransition(
            _("Only a scheduled allocation can be cancelled before it starts; stop it instead.")
        )
    allocation.state = AllocationState.CANCELLED
    allocation.save(update_fields=["state"])
    AllocationGpu.objects.filter(allocation=allocation).update(released=True)
    charged = LedgerEntry.objects.filter(allocation=allocation, kind=LedgerKind.CHARGE).aggregate(
        total=Sum("amount")
    )["total"]
    LedgerEntry.objects.create(
        team=allocation.team,
        user=acting.user,
        allocation=allocation,
        kind=LedgerKind.REFUND,
        amount=charged,
        currency=allocation.quote.currency,
        reason=LedgerReason.CANCELLATION,
        at=now,
    )
    event_record(
        allocation,
        kind=EventKind.CANCEL,
        actor=acting.user,
        from_state=AllocationState.SCHEDULED,
        to_state=AllocationState.CANCELLED,
        at=now,
    )
    return allocation


def _period_count_check(period_count) -> None:
    max_count = limits.period_count_max()
    if (
        not isinstance(period_count, int)
        or isinstance(period_count, bool)
        or not (1 <= period_count <= max_count)
    ):
        raise ValidationError(
            {"period_count": _("Period count must be between 1 and %(max)s.") % {"max": max_count}}
        )


def _next_slot_taken(allocation: Allocation, until: datetime) -> list:
    """The allocation's GPUs that someone else holds between its paid_until and `until`."""
    held = AllocationGpu.objects.filter(allocation=allocation).select_related("gpu")
    return [
        h.gpu
        for h in held
        if AllocationGpu.objects.filter(
            gpu=h.gpu, released=False, starts_at__lt=until, ends_at__gt=allocation.paid_until
        )
        .exclude(allocation=allocation)
        .exists()
    ]


def _refuse_if_taken(allocation: Allocation, until: datetime) -> None:
    if taken := _next_slot_taken(allocation, until):
        raise Conflict(
            _("GPU %(gpus)s is booked by someone else right after your paid period.")
            % {"gpus": ", ".join(f"#{g.index}" for g in taken)}
        )


@transaction.atomic
def extension_quote_create(
    *, acting: Acting, allocation: Allocation, period_count: int, now: datetime | None = None
) -> Quote:
    """The price of adding `period_count` periods right after paid_until, on the same GPUs:
    the GPUs and the allocation's per-period options at today's prices. A quote the customer
    reads before the extension charges exactly its total. An option without a current price
    is refused, never dropped."""
    acting.require(Action.BOOK)
    now = now or db_now()
    _period_count_check(period_count)
    if allocation.team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    if allocation.state not in LIVE_STATES or allocation.paid_until <= now:
        raise InvalidTransition(_("Only an allocation that has not ended can be extended."))
    paid_from = allocation.paid_until
    paid_until = paid_from + allocation.period.duration * period_count
    _refuse_if_taken(allocation, paid_until)
    per_period = [
        (option, quantity)
        for option, quantity in quote_options(quote=allocation.quote)
        if option.billing == OptionBilling.PER_PERIOD
    ]
    lines, total = quote_lines(
        gpu_model=allocation.gpu_model,
        gpu_count=allocation.gpu_count,
        period=allocation.period,
        period_count=period_count,
        options=per_period,
        at=now,
    )
    return quote_store(
        Quote(
            team=acting.team,
            user=acting.user,
            kind=QuoteKind.EXTENSION,
            extends=allocation,
            gpu_model=allocation.gpu_model,
            gpu_count=allocation.gpu_count,
            period=allocation.period,
            period_count=period_count,
            paid_from=paid_from,
            paid_until=paid_until,
            starts_now=False,
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
) -> Allocation:
    """Add an extension quote's periods right after paid_until on the same GPUs, if they are
    free, and charge exactly its total. Without a quote, one is made now (what the customer
    would have read at this moment) and charged."""
    now = now or db_now()
    if quote is None:
        _period_count_check(period_count)
    allocation = _locked(allocation, acting)
    acting.require(Action.BOOK)  # an extension is a purchase
    if allocation.state not in LIVE_STATES or allocation.paid_until <= now:
        raise InvalidTransition(_("Only an allocation that has not ended can be extended."))
    if quote is None:
        quote = extension_quote_create(
            acting=acting, allocation=allocation, period_count=period_count, now=now
        )
    quote = (
        Quote.objects.select_for_update()
        .filter(pk=quote.pk, kind=QuoteKind.EXTENSION, extends=allocation, team=acting.team)
        .first()
    )
    if quote is None:
        raise QuoteMissing(_("No such extension quote for this allocation."), field="quote")
    if quote.used_at is not None:
        raise QuoteUsed(_("This extension quote was already used; request a new one."))
    if quote.valid_until <= now or quote.paid_from != allocation.paid_until:
        raise QuoteExpired(
            _("The extension quote expired or the allocation changed; request a new one."),
            field="quote",
        )
    old_until, new_until = allocation.paid_until, quote.paid_until
    _refuse_if_taken(allocation, new_until)
    spend_limit_check(team=acting.team, amount=quote.total, currency=quote.currency, at=now)
    try:
        with transaction.atomic():
            AllocationGpu.objects.filter(allocation=allocation).update(ends_at=new_until)
    except IntegrityError as exc:
        raise_if_lost_race(exc)
        raise
    allocation.paid_until = new_until
    allocation.warned_24h_at = allocation.warned_1h_at = None
    allocation.save(update_fields=["paid_until", "warned_24h_at", "warned_1h_at"])
    Quote.objects.filter(pk=quote.pk).update(used_at=now)
    LedgerEntry.objects.create(
        team=allocation.team,
        user=acting.user,
        allocation=allocation,
        kind=LedgerKind.CHARGE,
        amount=quote.total,
        currency=quote.currency,
        reason=LedgerReason.EXTENSION,
        period_count=quote.period_count,
        at=now,
    )
    event_record(
        allocation,
        kind=EventKind.EXTEND,
        actor=acting.user,
        note=f"{old_until:%Y-%m-%d %H:%M} → {new_until:%Y-%m-%d %H:%M} UTC",
        at=now,
    )
    receipt_record(allocation=allocation, quote=quote, kind=NoticeKind.EXTENDED, at=now)
    return allocation
