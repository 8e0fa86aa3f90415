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
from catalog.selectors import gpu_price_at, option_price_at
from core.db import db_now, retried_transaction
from core.errors import Conflict
from core.money import Money
from rentals import limits
from rentals.errors import InvalidTransition, NotOffered
from rentals.models import (
    LIVE_STATES,
    Allocation,
    AllocationGpu,
    AllocationState,
    EventKind,
    LedgerEntry,
    LedgerKind,
)
from rentals.selectors import quote_options
from rentals.services.events import event_record, raise_if_lost_race
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
        description=_("Refund: cancelled before the start"),
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


def extension_price(*, allocation: Allocation, period_count: int, at: datetime) -> Money:
    """GPUs and per-period options of the original quote, at today's prices."""
    price = gpu_price_at(gpu_model=allocation.gpu_model, period=allocation.period, at=at)
    if price is None:
        raise NotOffered(_("This model is no longer offered for this period."))
    total = Money(price.unit_price, price.currency) * (allocation.gpu_count * period_count)
    for option, quantity in quote_options(quote=allocation.quote):
        if option.billing != OptionBilling.PER_PERIOD:
            continue
        option_price = option_price_at(option=option, period=allocation.period, at=at)
        if option_price is not None:
            total += Money(option_price.unit_price, option_price.currency) * (
                quantity * period_count
            )
    return total


@retried_transaction
def allocation_extend(
    *, acting: Acting, allocation: Allocation, period_count: int, now: datetime | None = None
) -> Allocation:
    """Add whole periods right after paid_until on the same GPUs, if they are free."""
    now = now or db_now()
    max_count = limits.period_count_max()
    if (
        not isinstance(period_count, int)
        or isinstance(period_count, bool)
        or not (1 <= period_count <= max_count)
    ):
        raise ValidationError(
            {"period_count": _("Period count must be between 1 and %(max)s.") % {"max": max_count}}
        )
    allocation = _locked(allocation, acting)
    acting.require(Action.BOOK)  # an extension is a purchase
    if allocation.state not in LIVE_STATES or allocation.paid_until <= now:
        raise InvalidTransition(_("Only an allocation that has not ended can be extended."))
    old_until = allocation.paid_until
    new_until = old_until + allocation.period.duration * period_count
    held = list(AllocationGpu.objects.filter(allocation=allocation).select_related("gpu"))
    taken = [
        h.gpu
        for h in held
        if AllocationGpu.objects.filter(
            gpu=h.gpu, released=False, starts_at__lt=new_until, ends_at__gt=old_until
        )
        .exclude(allocation=allocation)
        .exists()
    ]
    if taken:
        raise Conflict(
            _("GPU %(gpus)s is booked by someone else right after your paid period.")
            % {"gpus": ", ".join(f"#{g.index}" for g in taken)}
        )
    price = extension_price(allocation=allocation, period_count=period_count, at=now)
    spend_limit_check(team=acting.team, amount=price.amount, currency=price.currency, at=now)
    try:
        with transaction.atomic():
            AllocationGpu.objects.filter(allocation=allocation).update(ends_at=new_until)
    except IntegrityError as exc:
        raise_if_lost_race(exc)
        raise
    allocation.paid_until = new_until
    allocation.warned_24h_at = allocation.warned_1h_at = None
    allocation.save(update_fields=["paid_until", "warned_24h_at", "warned_1h_at"])
    LedgerEntry.objects.create(
        team=allocation.team,
        user=acting.user,
        allocation=allocation,
        kind=LedgerKind.CHARGE,
        amount=price.amount,
        currency=price.currency,
        description=_("Extension: %(n)s × %(period)s")
        % {"n": period_count, "period": allocation.period.name},
        at=now,
    )
    event_record(
        allocation,
        kind=EventKind.EXTEND,
        actor=acting.user,
        note=f"{old_until:%Y-%m-%d %H:%M} → {new_until:%Y-%m-%d %H:%M} UTC",
        at=now,
    )
    return allocation
