"""Booking: a valid quote becomes an allocation of specific GPUs and one charge of its total.

The path: the page (views/booking.py) or the API (api/bookings.py) → `allocation_book` →
placement (a node row lock, then its free GPUs) → `AllocationGpu` rows, which the exclusion
constraint `rentals_allocationgpu_no_overlap` guards whatever the code above got wrong.

A cluster quote (`node_count`) takes the same path: placement locks that many whole nodes of
one network group, and one allocation per node is written in the same transaction, under
the same constraint, so either every node is held for the paid period or none is.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast
from uuid import UUID

from django.db import IntegrityError, connection
from django.db.models import Model
from django.utils.translation import gettext as _

from accounts.models import SshKey
from accounts.roles import Acting, Action
from accounts.selectors import email_unverified_error, require_verified_email
from core.db import prefetched, retried_transaction, savepoint
from rentals.errors import NoCapacity, QuoteExpired, QuoteMissing, QuoteUsed
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationKey,
    AllocationState,
    Cluster,
    EventKind,
    LedgerKind,
    LedgerReason,
    Notice,
    NoticeKind,
    Quote,
    QuoteKind,
)
from rentals.placement import Placed, place_cluster_locked, place_locked
from rentals.purchase_hooks import purchase_check
from rentals.services.access import allocation_keys_attach, keys_for_booking
from rentals.services.events import events_announce, ledger_announce, raise_if_lost_race
from rentals.services.notices import receipt_mail
from rentals.services.quotes import no_capacity
from rentals.services.spend import spend_limit_check
from rentals.services.summary import holdings_changed
from rentals.sql import booking as booking_sql

_Row = TypeVar("_Row", bound=Model)


class QuoteFacts(TypedDict):
    """What a booking reads with its quote, in the same statement (`_quote_locked`)."""

    clock: datetime  # the database's
    booked: bool
    unverified: bool


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from rentals.access import WithAccessFacts

    LockedQuote = WithAnnotations[Quote, QuoteFacts]


@retried_transaction
def allocation_book(
    *,
    acting: Acting,
    quote: Quote | UUID,
    now: datetime | None = None,
    ssh_keys: list[int] | None = None,
    payment: object = None,
) -> Allocation:
    """Turn a valid quote (or its id) into an allocation of specific GPUs and one charge of
    its total. For a cluster quote: one allocation per node, sharing a `Cluster`; the first
    is returned and carries the charge. The allocations let in the booker's SSH keys
    `ssh_keys` (ids), or all the booker's keys.

    The allocations come back carrying what was written (their quote, model, period, node,
    GPUs and event), so a caller answers without reading them back.

    `payment`: what `rentals.purchase_hooks.purchase_authorise` gave the caller for this
    quote (a card team's authorisation), checked in this transaction with the team's mode,
    credit limit and overdue invoices."""
    acting.require(Action.BOOK)
    quote = _quote_locked(acting, quote)
    now = now or quote.clock
    paid_from, paid_until = _paid_window(quote, now)
    if quote.team.monthly_spend_limit is not None:  # checked again under the team's lock
        spend_limit_check(team=acting.team, amount=quote.total, currency=quote.currency, at=now)
    purchase_check(acting=acting, quote=quote, payment=payment, at=now)
    keys = keys_for_booking(acting=acting, ssh_key_ids=ssh_keys)
    cluster, placed = _place(acting, quote, paid_from, paid_until)
    state = AllocationState.RUNNING if paid_from <= now else AllocationState.SCHEDULED
    allocations = [
        _as_written(
            Allocation, team=acting.team, user=acting.user, quote=quote,
            gpu_model=quote.gpu_model, node=node, gpu_count=len(gpus), period=quote.period,
            paid_from=paid_from, paid_until=paid_until, state=state, cluster=cluster,
            created_at=quote.clock, vcpus_per_gpu=quote.vcpus_per_gpu,
            ram_gib_per_gpu=quote.ram_gib_per_gpu,
        )
        for node, gpus in placed
    ]  # fmt: skip
    try:
        with savepoint():
            holding_ids, event_ids, notice_id, charge_id = _write(allocations, placed, quote, now)
    except IntegrityError as exc:
        raise_if_lost_race(exc, _no_capacity(quote, paid_from, paid_until))
        raise
    allocation_keys_attach(allocations=allocations, keys=keys)
    holdings_changed(gpu_model_ids=[quote.gpu_model_id], node_ids=[node.pk for node, _ in placed])
    events_announce(_as_booked(allocations, placed, keys, holding_ids, event_ids, acting, now))
    ledger_announce([charge_id], charges_only=True)  # last: its invoice number is locked
    lead = allocations[0]
    receipt_mail(
        _as_written(
            Notice, id=notice_id, user=acting.user, allocation=lead, kind=NoticeKind.BOOKED,
            quote=quote, ends_at=paid_until, created_at=now,
        )
    )  # fmt: skip
    return lead


def _quote_locked(acting: Acting, quote: Quote | UUID) -> "LockedQuote":
    """The team's booking quote, row-locked, if it was not booked yet and the person may
    buy. One statement (`rentals.sql.booking.QUOTE_LOCKED`): the quote with its model, period,
    team (its spend limit) and region, the database's clock (`clock`), whether it was booked
    already and whether the person still has to confirm an e-mail address."""
    with connection.cursor() as cursor:
        cursor.execute(
            booking_sql.QUOTE_LOCKED,
            {"quote": quote.pk if isinstance(quote, Quote) else quote, "team": acting.team.pk,
             "kind": QuoteKind.BOOKING, "user": acting.user.pk},
        )  # fmt: skip
        row = cursor.fetchone()
    if row is None:
        require_verified_email(user=acting.user)  # that refusal first, as for a found quote
        raise QuoteMissing(_("No such quote."), field="quote")
    locked = cast("LockedQuote", booking_sql.QUOTE_LOCKED_ROW.build(row))
    locked.clock, locked.booked, locked.unverified = row[-3:]
    if locked.unverified:
        raise email_unverified_error()
    if locked.booked:
        raise QuoteUsed(_("This quote was already booked; request a new quote."), field="quote")
    return locked


def _paid_window(quote: Quote, now: datetime) -> tuple[datetime, datetime]:
    """The quote's paid period, if it can still be booked at `now`: a quote "starting now"
    starts now, for as long as it was priced."""
    if quote.valid_until <= now:
        raise QuoteExpired(
            _("The quote expired at %(at)s; request a new quote.")
            % {"at": quote.valid_until.isoformat()},
            field="quote",
        )
    if quote.starts_now:
        return now, now + (quote.paid_until - quote.paid_from)
    if quote.paid_from < now:
        raise QuoteExpired(_("The quote's start has passed; request a new quote."))
    return quote.paid_from, quote.paid_until


def _as_booked(
    allocations: list[Allocation],
    placed: list[Placed],
    keys: list[SshKey],
    holding_ids: dict[int, int],
    event_ids: dict[UUID, int],
    acting: Acting,
    now: datetime,
) -> list[AllocationEvent]:
    """Attach to each allocation what `_write` wrote for it (its holdings, its booked event,
    its keys), as if read back; back: the events."""
    events: list[AllocationEvent] = []
    for allocation, (_node, gpus) in zip(allocations, placed, strict=True):
        held = [
            _as_written(
                AllocationGpu, id=holding_ids[gpu.pk], allocation=allocation, gpu=gpu,
                starts_at=allocation.paid_from, ends_at=allocation.paid_until,
            )
            for gpu in gpus
        ]  # fmt: skip
        event = _as_written(
            AllocationEvent, id=event_ids[allocation.pk], allocation=allocation, at=now,
            actor=acting.user, kind=EventKind.BOOKED, to_state=allocation.state,
        )  # fmt: skip
        prefetched(allocation, "held", held)
        prefetched(allocation, "events", [event])
        facts = cast("WithAccessFacts", allocation)  # given here what rentals.access prefetches
        facts.live_gpus = held  # what its access is judged from (rentals.access)
        facts.member_keys = [AllocationKey(allocation=allocation, ssh_key=k) for k in keys]
        events.append(event)
    return events


def _write(
    allocations: list[Allocation], placed: list[Placed], quote: Quote, now: datetime
) -> tuple[dict[int, int], dict[UUID, int], int, int]:
    """Write the booking (`rentals.sql.booking.BOOKING_WRITE`); back: the holdings' ids by GPU id,
    the events' ids by allocation id, the receipt's id and the charge's."""
    lead = allocations[0]
    params = {
        "team": lead.team_id, "user": lead.user_id, "quote": quote.pk,
        "cluster": lead.cluster_id, "model": quote.gpu_model_id, "period": quote.period_id,
        "paid_from": lead.paid_from, "paid_until": lead.paid_until, "state": lead.state,
        "created_at": lead.created_at, "now": now, "lead": lead.pk,
        "allocations": [a.pk for a in allocations],
        "nodes": [node.pk for node, _gpus in placed],
        "gpu_counts": [len(gpus) for _node, gpus in placed],
        "holders": [a.pk for a, (_node, gpus) in zip(allocations, placed, strict=True)
                    for _gpu in gpus],
        "gpus": [gpu.pk for _node, gpus in placed for gpu in gpus],
        "charge": LedgerKind.CHARGE, "amount": quote.total, "net": quote.net_total,
        "vat": quote.vat_total, "currency": quote.currency,
        "reason": LedgerReason.BOOKING, "period_count": quote.period_count,
        "booked": EventKind.BOOKED, "receipt": NoticeKind.BOOKED,
        "vcpus_per_gpu": quote.vcpus_per_gpu, "ram_gib_per_gpu": quote.ram_gib_per_gpu,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(booking_sql.BOOKING_WRITE, params)
        holdings, events, notice_id, charge_id = cursor.fetchone()
    return (
        {int(gpu): pk for gpu, pk in holdings.items()},
        {UUID(allocation): pk for allocation, pk in events.items()},
        notice_id,
        charge_id,
    )


def _as_written(model: type[_Row], **fields: Any) -> _Row:
    """A `model` instance for a row written with SQL (`BOOKING_WRITE`), as if read back."""
    instance = model(**fields)
    instance._state.adding, instance._state.db = False, connection.alias
    return instance


def _place(
    acting: Acting, quote: Quote, paid_from: datetime, paid_until: datetime
) -> tuple[Cluster | None, list[Placed]]:
    """(the new cluster or None, [(node, GPUs)]) with every node locked, or NoCapacity."""
    if not quote.node_count:
        placed = place_locked(
            gpu_model=quote.gpu_model,
            gpu_count=quote.gpu_count,
            starts_at=paid_from,
            ends_at=paid_until,
            region_id=quote.region_id,  # a quote for a region places only there
            requires=quote.requires,  # and one with minimum versions only on nodes that meet them
        )
        if placed is None:
            raise _no_capacity(quote, paid_from, paid_until)
        return None, [placed]
    grouped = place_cluster_locked(
        gpu_model=quote.gpu_model,
        node_count=quote.node_count,
        gpus_per_node=quote.gpu_count // quote.node_count,
        starts_at=paid_from,
        ends_at=paid_until,
        region_id=quote.region_id,
        requires=quote.requires,
    )
    if grouped is None:
        raise _no_capacity(quote, paid_from, paid_until)
    group, nodes = grouped
    cluster = Cluster.objects.create(
        team=acting.team, user=acting.user, quote=quote, gpu_model=quote.gpu_model,
        node_count=quote.node_count, network_group=group,
    )  # fmt: skip
    return cluster, nodes


def _no_capacity(quote: Quote, paid_from: datetime, paid_until: datetime) -> NoCapacity:
    return no_capacity(
        gpu_model=quote.gpu_model, gpu_count=quote.gpu_count, node_count=quote.node_count,
        starts_at=paid_from, ends_at=paid_until, region=quote.region, requires=quote.requires,
    )  # fmt: skip
