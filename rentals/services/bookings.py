"""Booking: a valid quote becomes an allocation of specific GPUs and one charge of its total.

The path: the page (views/catalog.py) or the API (api/views.py) → `allocation_book` →
placement (a node row lock, then its free GPUs) → `AllocationGpu` rows, which the exclusion
constraint `rentals_allocationgpu_no_overlap` guards whatever the code above got wrong.

A cluster quote (`node_count`) takes the same path: placement locks that many whole nodes of
one network group, and one allocation per node is written in the same transaction, under
the same constraint, so either every node is held for the paid period or none is.
"""

from datetime import datetime
from uuid import UUID

from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, Exists, Func, OuterRef
from django.utils.translation import gettext as _

from accounts.access import Acting, Action
from accounts.selectors import require_verified_email
from core.db import retried_transaction
from core.versions import CATALOG, bump
from rentals.availability import earliest_start
from rentals.errors import NoCapacity, QuoteExpired, QuoteMissing, QuoteUsed
from rentals.models import (
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
from rentals.placement import place_cluster_locked, place_locked
from rentals.services.events import events_record, raise_if_lost_race
from rentals.services.notices import receipt_record
from rentals.services.spend import spend_limit_check


@retried_transaction
def allocation_book(
    *, acting: Acting, quote: Quote | UUID, now: datetime | None = None
) -> Allocation:
    """Turn a valid quote (or its id) into an allocation of specific GPUs and one charge of
    its total. For a cluster quote: one allocation per node, sharing a `Cluster`; the first
    is returned and carries the charge.

    The allocations come back carrying what was written (their quote, model, period, node,
    GPUs and event), so a caller answers without reading them back."""
    acting.require(Action.BOOK)
    require_verified_email(user=acting.user)
    # One statement: the quote locked, with its model and period, the database's clock
    # and whether it was booked already.
    quote = (
        Quote.objects.select_for_update(of=("self",))
        .select_related("gpu_model", "period")
        .annotate(
            clock=Func(function="statement_timestamp", output_field=DateTimeField()),
            booked=Exists(Allocation.objects.filter(quote=OuterRef("pk"))),
        )
        .filter(pk=getattr(quote, "pk", quote), team=acting.team, kind=QuoteKind.BOOKING)
        .first()
    )
    if quote is None:
        raise QuoteMissing(_("No such quote."), field="quote")
    now = now or quote.clock
    if quote.booked:
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
    cluster, placed = _place(acting, quote, paid_from, paid_until)
    state = AllocationState.RUNNING if paid_from <= now else AllocationState.SCHEDULED
    allocations = Allocation.objects.bulk_create(
        Allocation(
            team=acting.team, user=acting.user, quote=quote, gpu_model=quote.gpu_model,
            node=node, gpu_count=len(gpus), period=quote.period, paid_from=paid_from,
            paid_until=paid_until, state=state, cluster=cluster,
        )
        for node, gpus in placed
    )  # fmt: skip
    try:
        with transaction.atomic():
            holdings = AllocationGpu.objects.bulk_create(
                AllocationGpu(
                    allocation=allocation, gpu=gpu, starts_at=paid_from, ends_at=paid_until
                )
                for allocation, (_node, gpus) in zip(allocations, placed, strict=True)
                for gpu in gpus
            )
    except IntegrityError as exc:
        raise_if_lost_race(exc, _no_capacity(quote, paid_from, paid_until))
        raise
    bump(CATALOG)  # GPUs free now changed for the catalog list
    held = {allocation.pk: [] for allocation in allocations}
    for holding in sorted(holdings, key=lambda h: h.gpu.index):
        held[holding.allocation_id].append(holding)
    for allocation in allocations:
        _carry(allocation, "held", held[allocation.pk])
    lead = allocations[0]
    LedgerEntry.objects.create(
        team=acting.team,
        user=acting.user,
        allocation=lead,
        kind=LedgerKind.CHARGE,
        amount=quote.total,
        currency=quote.currency,
        reason=LedgerReason.BOOKING,
        period_count=quote.period_count,
        at=now,
    )
    events = events_record(
        allocations, kind=EventKind.BOOKED, actor=acting.user, to_state=state, at=now
    )
    for allocation, event in zip(allocations, events, strict=True):
        _carry(allocation, "events", [event])
    receipt_record(allocation=lead, quote=quote, kind=NoticeKind.BOOKED, at=now)
    return lead


def _carry(allocation: Allocation, related: str, rows: list) -> None:
    """Make `allocation.<related>.all()` answer `rows` without a query, as prefetch_related
    leaves it (a query set holding its results); a further filter still reads the table."""
    rows_qs = getattr(allocation, related).all()
    rows_qs._result_cache, rows_qs._prefetch_done = rows, True
    allocation.__dict__.setdefault("_prefetched_objects_cache", {})[related] = rows_qs


def _place(acting, quote, paid_from, paid_until):
    """(the new cluster or None, [(node, GPUs)]) with every node locked, or NoCapacity."""
    if not quote.node_count:
        placed = place_locked(
            gpu_model=quote.gpu_model,
            gpu_count=quote.gpu_count,
            starts_at=paid_from,
            ends_at=paid_until,
        )
        if placed is None:
            raise _no_capacity(quote, paid_from, paid_until)
        return None, [placed]
    placed = place_cluster_locked(
        gpu_model=quote.gpu_model,
        node_count=quote.node_count,
        gpus_per_node=quote.gpu_count // quote.node_count,
        starts_at=paid_from,
        ends_at=paid_until,
    )
    if placed is None:
        raise _no_capacity(quote, paid_from, paid_until)
    group, nodes = placed
    cluster = Cluster.objects.create(
        team=acting.team, user=acting.user, quote=quote, gpu_model=quote.gpu_model,
        node_count=quote.node_count, network_group=group,
    )  # fmt: skip
    return cluster, nodes


def _no_capacity(quote, paid_from, paid_until) -> NoCapacity:
    detail = (
        _("Not enough free whole %(model)s nodes in one network group for that period.")
        if quote.node_count
        else _("Not enough free %(model)s GPUs for that period.")
    )
    return NoCapacity(
        detail % {"model": quote.gpu_model},
        earliest_start=earliest_start(
            gpu_model=quote.gpu_model,
            gpu_count=quote.gpu_count,
            node_count=quote.node_count,
            duration=paid_until - paid_from,
            not_before=paid_from,
        ),
    )
