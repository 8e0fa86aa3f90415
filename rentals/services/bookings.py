"""Booking: a valid quote becomes an allocation of specific GPUs and one charge of its total.

The path: the page (views/catalog.py) or the API (api/views.py) → `allocation_book` →
placement (a node row lock, then its free GPUs) → `AllocationGpu` rows, which the exclusion
constraint `rentals_allocationgpu_no_overlap` guards whatever the code above got wrong.
"""

from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from accounts.access import Acting, Action
from accounts.selectors import require_verified_email
from core.db import db_now, retried_transaction
from rentals.availability import earliest_start
from rentals.errors import NoCapacity, QuoteExpired, QuoteMissing, QuoteUsed
from rentals.models import (
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
from rentals.placement import place_locked
from rentals.services.events import event_record, raise_if_lost_race
from rentals.services.notices import receipt_record
from rentals.services.spend import spend_limit_check


@retried_transaction
def allocation_book(*, acting: Acting, quote: Quote, now: datetime | None = None) -> Allocation:
    """Turn a valid quote into an allocation of specific GPUs and one charge of its total."""
    acting.require(Action.BOOK)
    now = now or db_now()
    require_verified_email(user=acting.user)
    quote = (
        Quote.objects.select_for_update()
        .filter(pk=quote.pk, team=acting.team, kind=QuoteKind.BOOKING)
        .first()
    )
    if quote is None:
        raise QuoteMissing(_("No such quote."), field="quote")
    if Allocation.objects.filter(quote=quote).exists():
        raise QuoteUsed(_("This quote was already booked; request a new quote."), field="quote")
    if quote.valid_until <= now:
        raise QuoteExpired(
            _("The quote expired at %(at)s; request a new quote.")
            % {"at": quote.valid_until.isoformat()},
            field="quote",
        )
    if quote.starts_now:
        paid_from = now
        paid_until = now + (quote.paid_until - quote.paid_from)
    else:
        paid_from, paid_until = quote.paid_from, quote.paid_until
        if paid_from < now:
            raise QuoteExpired(_("The quote's start has passed; request a new quote."))

    spend_limit_check(team=acting.team, amount=quote.total, currency=quote.currency, at=now)
    placed = place_locked(
        gpu_model=quote.gpu_model,
        gpu_count=quote.gpu_count,
        starts_at=paid_from,
        ends_at=paid_until,
    )
    if placed is None:
        raise NoCapacity(
            _("Not enough free %(model)s GPUs for that period.") % {"model": quote.gpu_model},
            earliest_start=earliest_start(
                gpu_model=quote.gpu_model,
                gpu_count=quote.gpu_count,
                duration=paid_until - paid_from,
                not_before=paid_from,
            ),
        )
    node, gpus = placed
    state = AllocationState.RUNNING if paid_from <= now else AllocationState.SCHEDULED
    allocation = Allocation(
        team=acting.team,
        user=acting.user,
        quote=quote,
        gpu_model=quote.gpu_model,
        node=node,
        gpu_count=quote.gpu_count,
        period=quote.period,
        paid_from=paid_from,
        paid_until=paid_until,
        state=state,
    )
    allocation.save()
    try:
        with transaction.atomic():
            AllocationGpu.objects.bulk_create(
                AllocationGpu(
                    allocation=allocation, gpu=gpu, starts_at=paid_from, ends_at=paid_until
                )
                for gpu in gpus
            )
    except IntegrityError as exc:
        raise_if_lost_race(exc)
        raise
    LedgerEntry.objects.create(
        team=acting.team,
        user=acting.user,
        allocation=allocation,
        kind=LedgerKind.CHARGE,
        amount=quote.total,
        currency=quote.currency,
        reason=LedgerReason.BOOKING,
        period_count=quote.period_count,
        at=now,
    )
    event_record(allocation, kind=EventKind.BOOKED, actor=acting.user, to_state=state, at=now)
    receipt_record(allocation=allocation, quote=quote, kind=NoticeKind.BOOKED, at=now)
    return allocation
