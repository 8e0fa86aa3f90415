"""Booking, the allocation life cycle, enforcement by time, and expiry warnings.

The paid period is fixed at booking: stop and start change `state` only, and only an
extension moves `paid_until` (the database refuses anything else, see migration 0002).
"""

import functools
import logging
import random
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from anchorgpu.errors import Conflict, DomainError, NoCapacity
from catalog.money import Money
from catalog.selectors import gpu_price_at, option_price_at
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationState,
    LedgerEntry,
    LedgerKind,
    Quote,
)
from rentals.models.allocations import LIVE_STATES
from rentals.placement import earliest_start, place_locked
from rentals.selectors import quote_options

logger = logging.getLogger(__name__)

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock
EXCLUSION_VIOLATION = "23P01"
ATTEMPTS = 4


class QuoteExpired(Conflict):
    code = "quote_expired"
    title = _("The quote has expired")


class QuoteUsed(Conflict):
    code = "quote_used"
    title = _("The quote was already booked")


class InvalidTransition(Conflict):
    code = "invalid_state"
    title = _("Not possible in the allocation's current state")


def _sqlstate(exc):
    return getattr(getattr(exc, "__cause__", None), "sqlstate", None)


class _Race(Exception):
    """Another booking took the GPUs between our read and our insert."""


def retrying(func):
    """Re-run a transactional service on deadlock / serialization failure, with jitter.

    Each attempt is its own atomic block (a savepoint when the caller holds a transaction),
    so a failed attempt leaves nothing behind.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with transaction.atomic():
                    return func(*args, **kwargs)
            except (OperationalError, _Race) as exc:
                if isinstance(exc, OperationalError) and _sqlstate(exc) not in RETRYABLE_SQLSTATES:
                    raise
                if attempt == ATTEMPTS:
                    if isinstance(exc, _Race):
                        raise NoCapacity(_("The GPUs were just taken by another booking.")) from exc
                    raise
                time.sleep(random.uniform(0.005, 0.03) * attempt)
        raise AssertionError("unreachable")

    return wrapper


def _event(allocation, *, kind, actor=None, from_state="", to_state="", note="", at=None):
    return AllocationEvent.objects.create(
        allocation=allocation,
        at=at or timezone.now(),
        actor=actor,
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        note=note,
    )


@retrying
def allocation_book(*, user, quote: Quote, now: datetime | None = None) -> Allocation:
    """Turn a valid quote into an allocation of specific GPUs and one charge of its total."""
    now = now or timezone.now()
    quote = Quote.objects.select_for_update().filter(pk=quote.pk, user=user).first()
    if quote is None:
        raise DomainError(_("No such quote."), field="quote")
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
        user=user,
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
        if _sqlstate(exc) == EXCLUSION_VIOLATION:
            raise _Race() from exc
        raise
    LedgerEntry.objects.create(
        user=user,
        allocation=allocation,
        kind=LedgerKind.CHARGE,
        amount=quote.total,
        currency=quote.currency,
        description=_("Booking: %s") % quote.lines.order_by("position").first().description,
        at=now,
    )
    _event(allocation, kind="booked", actor=user, to_state=state, at=now)
    return allocation


def _locked(allocation) -> Allocation:
    return Allocation.objects.select_for_update().get(pk=allocation.pk)


def _transition(allocation, *, actor, to_state, allowed, kind, now=None):
    now = now or timezone.now()
    with transaction.atomic():
        allocation = _locked(allocation)
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
        _event(allocation, kind=kind, actor=actor, from_state=from_state, to_state=to_state, at=now)
    return allocation


def allocation_stop(*, allocation: Allocation, actor, now=None) -> Allocation:
    """Stop the GPUs' work. The paid period runs on: stopped time is paid time."""
    return _transition(
        allocation,
        actor=actor,
        to_state=AllocationState.STOPPED,
        allowed=[AllocationState.RUNNING],
        kind="stop",
        now=now,
    )


def allocation_start(*, allocation: Allocation, actor, now=None) -> Allocation:
    return _transition(
        allocation,
        actor=actor,
        to_state=AllocationState.RUNNING,
        allowed=[AllocationState.STOPPED],
        kind="start",
        now=now,
    )


@transaction.atomic
def allocation_cancel(*, allocation: Allocation, actor, now=None) -> Allocation:
    """Cancel before the start, refunding every charge in full; after the start only stop."""
    now = now or timezone.now()
    allocation = _locked(allocation)
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
        user=allocation.user,
        allocation=allocation,
        kind=LedgerKind.REFUND,
        amount=charged,
        currency=allocation.quote.currency,
        description=_("Refund: cancelled before the start"),
        at=now,
    )
    _event(
        allocation,
        kind="cancel",
        actor=actor,
        from_state=AllocationState.SCHEDULED,
        to_state=AllocationState.CANCELLED,
        at=now,
    )
    return allocation


def extension_price(*, allocation: Allocation, period_count: int, at: datetime) -> Money:
    """GPUs and per-period options of the original quote, at today's prices."""
    price = gpu_price_at(gpu_model=allocation.gpu_model, period=allocation.period, at=at)
    if price is None:
        raise DomainError(_("This model is no longer offered for this period."))
    total = Money(price.unit_price, price.currency) * (allocation.gpu_count * period_count)
    for option, quantity in quote_options(quote=allocation.quote):
        if option.billing != "per_period":
            continue
        option_price = option_price_at(option=option, period=allocation.period, at=at)
        if option_price is not None:
            total += Money(option_price.unit_price, option_price.currency) * (
                quantity * period_count
            )
    return total


@retrying
def allocation_extend(
    *, allocation: Allocation, actor, period_count: int, now: datetime | None = None
) -> Allocation:
    """Add whole periods right after paid_until on the same GPUs, if they are free."""
    now = now or timezone.now()
    max_count = settings.ANCHORGPU["MAX_PERIOD_COUNT"]
    if (
        not isinstance(period_count, int)
        or isinstance(period_count, bool)
        or not (1 <= period_count <= max_count)
    ):
        raise ValidationError(
            {"period_count": _("Period count must be between 1 and %(max)s.") % {"max": max_count}}
        )
    allocation = _locked(allocation)
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
    try:
        with transaction.atomic():
            AllocationGpu.objects.filter(allocation=allocation).update(ends_at=new_until)
    except IntegrityError as exc:
        if _sqlstate(exc) == EXCLUSION_VIOLATION:
            raise _Race() from exc
        raise
    allocation.paid_until = new_until
    allocation.warned_24h_at = allocation.warned_1h_at = None
    allocation.save(update_fields=["paid_until", "warned_24h_at", "warned_1h_at"])
    LedgerEntry.objects.create(
        user=allocation.user,
        allocation=allocation,
        kind=LedgerKind.CHARGE,
        amount=price.amount,
        currency=price.currency,
        description=_("Extension: %(n)s × %(period)s")
        % {"n": period_count, "period": allocation.period.name},
        at=now,
    )
    _event(
        allocation,
        kind="extend",
        actor=actor,
        note=f"{old_until:%Y-%m-%d %H:%M} → {new_until:%Y-%m-%d %H:%M} UTC",
        at=now,
    )
    return allocation


_ENFORCE_SQL = """
WITH moved AS (
    UPDATE rentals_allocation AS a SET state = %(to)s
    FROM (
        SELECT id, state FROM rentals_allocation
        WHERE state = ANY(%(from)s) AND {condition}
        FOR UPDATE SKIP LOCKED
    ) AS old
    WHERE a.id = old.id
    RETURNING a.id, old.state AS from_state
)
INSERT INTO rentals_allocationevent (allocation_id, at, kind, from_state, to_state, note)
SELECT id, %(now)s, %(kind)s, from_state, %(to)s, '' FROM moved
"""


def allocations_enforce(*, now: datetime | None = None) -> dict:
    """Start what is due, expire what has ended: one conditional statement per transition.

    It compares times (the database clock unless `now` is given), never counts ticks, so
    one run after a long outage catches up; a second overlapping run finds nothing to do.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if now is None:
            cursor.execute("SELECT now()")
            now = cursor.fetchone()[0]
        cursor.execute(
            _ENFORCE_SQL.format(condition="paid_until <= %(now)s"),
            {
                "to": AllocationState.EXPIRED,
                "from": list(LIVE_STATES),
                "now": now,
                "kind": "expire",
            },
        )
        expired = cursor.rowcount
        cursor.execute(
            _ENFORCE_SQL.format(condition="paid_from <= %(now)s AND paid_until > %(now)s"),
            {
                "to": AllocationState.RUNNING,
                "from": [AllocationState.SCHEDULED],
                "now": now,
                "kind": "start",
            },
        )
        started = cursor.rowcount
    if started or expired:
        logger.info("enforcement: %s started, %s expired", started, expired)
    return {"started": started, "expired": expired}


WARNINGS = (("warned_24h_at", timedelta(hours=24)), ("warned_1h_at", timedelta(hours=1)))


def expiry_warnings_send(*, now: datetime | None = None) -> int:
    """Email the owner 24 h and 1 h before paid_until, once each (recorded on the row)."""
    now = now or timezone.now()
    sent = 0
    for field, ahead in WARNINGS:
        while True:
            with transaction.atomic():
                batch = list(
                    Allocation.objects.select_for_update(skip_locked=True)
                    .filter(
                        state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
                        paid_until__gt=now,
                        paid_until__lte=now + ahead,
                        **{f"{field}__isnull": True},
                    )
                    .select_related("user", "gpu_model")[:100]
                )
                if not batch:
                    break
                for allocation in batch:
                    if allocation.user.email:
                        send_mail(
                            subject=_("Your AnchorGPU allocation ends at %(at)s UTC")
                            % {"at": allocation.paid_until.strftime("%Y-%m-%d %H:%M")},
                            message=_(
                                "Your %(count)s × %(model)s allocation's paid period ends at "
                                "%(at)s UTC. Extend it before then to keep the same GPUs."
                            )
                            % {
                                "count": allocation.gpu_count,
                                "model": allocation.gpu_model.name,
                                "at": allocation.paid_until.strftime("%Y-%m-%d %H:%M"),
                            },
                            from_email=None,
                            recipient_list=[allocation.user.email],
                        )
                    # The 1 h warning makes the 24 h one pointless if both are due now.
                    updates = {field: now}
                    if field == "warned_1h_at" or allocation.paid_until - now <= timedelta(hours=1):
                        updates = {"warned_24h_at": allocation.warned_24h_at or now, field: now}
                    Allocation.objects.filter(pk=allocation.pk).update(**updates)
                    sent += 1
    return sent
