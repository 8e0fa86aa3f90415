"""Credit notes for impaired time: the provider's fault paid back exactly.

A span's credit is its impaired GPU-hours × the booking's hourly rate per GPU (the quote
snapshot's unit price ÷ the period's hours; an extension's hours at the extension quote's
rate), clipped to the paid period, at the currency's minor units: never more than was
charged for those GPUs in that span, nor more than the allocation's charges less what was
already given back. That is its net; the VAT the charge carried (the booking quote's rate)
is added on the note's net total, rounded once. Staff read the note first (`preview`); issuing it writes one ledger row
of kind `credit` per span, and the database holds one credit per span
(`rentals_ledgerentry_one_credit_per_span`) whoever clicks at the same moment.
"""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TypedDict
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from accounts.roles import Operation, operator_require
from core.db import db_now, retried_transaction, savepoint
from core.errors import DomainError
from core.money import quantize
from core.vat import vat_split, vat_total
from rentals.errors import AlreadyCredited, NotImpaired
from rentals.models import (
    CREDITS,
    Allocation,
    ImpairedSpan,
    LedgerEntry,
    LedgerKind,
    LedgerReason,
    Notice,
    NoticeKind,
    Quote,
    QuoteKind,
    QuoteLineKind,
    span_counts,
)
from rentals.selectors.allocations import CREDIT_PREFETCH
from rentals.services.events import ledger_announce
from rentals.services.notices import notices_queue

HOUR = Decimal(3600 * 10**6)  # microseconds


def _hours(delta: timedelta) -> Decimal:
    return Decimal(delta // timedelta(microseconds=1)) / HOUR


@dataclass(frozen=True)
class Rate:
    """A GPU's price per hour over [starts_at, ends_at) of the paid period."""

    starts_at: datetime
    ends_at: datetime
    per_gpu_hour: Decimal


@dataclass(frozen=True)
class CreditLine:
    span: ImpairedSpan
    gpus: int
    hours: Decimal
    gpu_hours: Decimal
    hourly_rate: Decimal  # per GPU, of the span's first paid hour (the booking's, mostly)
    amount: Decimal


@dataclass(frozen=True)
class CreditNote:
    """Lines of net impaired time; `total` is what is given back: their net with the VAT
    the charge carried (`vat`, on the net total, rounded once)."""

    allocation: Allocation
    lines: list[CreditLine]
    net: Decimal
    vat: Decimal
    total: Decimal
    currency: str
    issued: bool = False


def _gpu_rate(quote: Quote) -> Decimal:
    line = next(line for line in quote.lines.all() if line.kind == QuoteLineKind.GPU)
    rate: Decimal = line.unit_price / _hours(quote.period.duration)  # MoneyField: Any
    return rate


def rates_of(allocation: Allocation) -> list[Rate]:
    """The paid period in pieces, each at the rate its quote charged: the booking, then
    each extension charged on it."""
    extensions = sorted(
        (
            q
            for q in allocation.extension_quotes.all()
            if q.kind == QuoteKind.EXTENSION and q.used_at is not None
        ),
        key=lambda q: q.paid_from,
    )
    booked_until = extensions[0].paid_from if extensions else allocation.paid_until
    rates = [Rate(allocation.paid_from, booked_until, _gpu_rate(allocation.quote))]
    rates += [Rate(q.paid_from, q.paid_until, _gpu_rate(q)) for q in extensions]
    return rates


def _line(
    allocation: Allocation, span: ImpairedSpan, rates: list[Rate], currency: str
) -> CreditLine:
    assert span.ended_at is not None  # _creditable keeps the spans that have ended
    gpus = min(len(span.gpus), allocation.gpu_count)
    starts = max(span.started_at, allocation.paid_from)
    ends = min(span.ended_at, allocation.paid_until)
    exact, hours = Decimal(0), Decimal(0)
    for rate in rates:
        overlap = min(ends, rate.ends_at) - max(starts, rate.starts_at)
        if overlap > timedelta(0):
            hours += _hours(overlap)
            exact += gpus * _hours(overlap) * rate.per_gpu_hour
    return CreditLine(
        span=span, gpus=gpus, hours=hours, gpu_hours=gpus * hours,
        hourly_rate=rates[0].per_gpu_hour, amount=quantize(exact, currency),
    )  # fmt: skip


def _creditable(allocation: Allocation, span_id: int | None) -> list[ImpairedSpan]:
    # A span shorter than IMPAIRED_MIN_SECONDS is not impaired time: nothing to credit.
    spans = sorted(
        (s for s in allocation.impaired_spans.all() if span_counts(s)), key=lambda s: s.started_at
    )
    if span_id is not None:
        spans = [s for s in spans if s.pk == span_id]
        if not spans:
            raise DomainError(
                _(
                    "Allocation %(id)s was not impaired in span %(span)s: there is nothing to credit."
                )
                % {"id": allocation.pk, "span": span_id},
                field="span",
            )
    if not spans:
        raise NotImpaired(
            _("Allocation %(id)s was never impaired: there is no impaired time to credit.")
            % {"id": allocation.pk}
        )
    credited = {s.pk for s in spans if s.credits.all()}
    open_ = [s for s in spans if s.ended_at is None]
    todo = [s for s in spans if s.ended_at is not None and s.pk not in credited]
    if not todo:
        if open_:
            raise NotImpaired(
                _(
                    "Allocation %(id)s is still impaired: its span has no end yet. Replace its "
                    "GPUs, or credit the time once they work again."
                )
                % {"id": allocation.pk}
            )
        raise AlreadyCredited(
            _("The impaired time of allocation %(id)s was already credited.")
            % {"id": allocation.pk}
        )
    return todo


def _given_room(allocation: Allocation, currency: str) -> Decimal:
    """What the allocation's charges (a cluster's, all of its nodes': one query) less refunds
    and credits leave to give back, net."""
    if allocation.cluster_id:
        rows = list(
            LedgerEntry.objects.filter(
                allocation__cluster_id=allocation.cluster_id, currency=currency
            )
        )
    else:
        rows = [e for e in allocation.ledger.all() if e.currency == currency]
    charged = sum((e.net for e in rows if e.kind == LedgerKind.CHARGE), Decimal(0))
    back = sum((e.net for e in rows if e.kind in CREDITS), Decimal(0))
    return charged - back


def credit_note_build(*, allocation: Allocation, span_id: int | None = None) -> CreditNote:
    """The credit note for the allocation's impaired spans not yet credited, as staff and
    the customer read it before it is issued. Refused when there is nothing to credit."""
    currency = allocation.quote.currency
    rates = rates_of(allocation)
    lines = [_line(allocation, s, rates, currency) for s in _creditable(allocation, span_id)]
    room = max(_given_room(allocation, currency), Decimal(0))
    capped: list[CreditLine] = []
    for line in lines:
        amount = min(line.amount, quantize(room, currency))
        room -= amount
        capped.append(line if amount == line.amount else _with_amount(line, amount))
    capped = [line for line in capped if line.amount > 0]
    if not capped:
        raise NotImpaired(
            _("Allocation %(id)s has no paid impaired time to credit.") % {"id": allocation.pk}
        )
    net = quantize(sum((line.amount for line in capped), Decimal(0)), currency)
    vat = vat_total(net, allocation.quote.vat_rate, currency)
    return CreditNote(allocation, capped, net, vat, net + vat, currency)


def _with_amount(line: CreditLine, amount: Decimal) -> CreditLine:
    return CreditLine(line.span, line.gpus, line.hours, line.gpu_hours, line.hourly_rate, amount)


def _locked(allocation_id: UUID) -> Allocation:
    allocation = (
        Allocation.objects.select_for_update(of=("self",))
        .select_related("quote__period", "team", "user", "gpu_model", "cluster")
        .prefetch_related(*CREDIT_PREFETCH)
        .filter(pk=allocation_id)
        .first()
    )
    if allocation is None:
        raise NotImpaired(_("No such allocation."))
    return allocation


def credit_note_preview(
    *, operator: User, allocation_id: UUID, span_id: int | None = None
) -> CreditNote:
    """The note as it would be issued now; writes nothing."""
    operator_require(operator, Operation.CREDIT)
    with transaction.atomic():
        return credit_note_build(allocation=_locked(allocation_id), span_id=span_id)


@retried_transaction
def credit_note_issue(
    *,
    operator: User,
    allocation_id: UUID,
    span_id: int | None = None,
    now: datetime | None = None,
) -> CreditNote:
    """Issue the note: a ledger row of kind `credit` per span and a receipt notice each.
    Two staff members at once: the second finds the span credited (409)."""
    operator_require(operator, Operation.CREDIT)
    now = now or db_now()
    allocation = _locked(allocation_id)
    note = credit_note_build(allocation=allocation, span_id=span_id)
    shares, _vat = vat_split(
        [line.amount for line in note.lines], allocation.quote.vat_rate, note.currency
    )
    try:
        with savepoint():
            credits = LedgerEntry.objects.bulk_create(
                LedgerEntry(
                    team=allocation.team, user=allocation.user, allocation=allocation,
                    period_id=allocation.period_id, kind=LedgerKind.CREDIT,
                    reason=LedgerReason.IMPAIRMENT, amount=line.amount + vat, net=line.amount,
                    vat=vat, currency=note.currency, impaired_span=line.span, at=now,
                )
                for line, vat in zip(note.lines, shares, strict=True)
            )  # fmt: skip
    except IntegrityError as exc:  # the database's one credit per span
        raise AlreadyCredited(
            _("The impaired time of allocation %(id)s was already credited.")
            % {"id": allocation.pk}
        ) from exc
    notices = Notice.objects.bulk_create(
        Notice(
            user=allocation.user, allocation=allocation, kind=NoticeKind.CREDITED,
            impaired_span=line.span, ends_at=allocation.paid_until, created_at=now,
        )
        for line in note.lines
    )  # fmt: skip
    mailed = [n.pk for n in notices] if allocation.user.email else []
    transaction.on_commit(lambda: notices_queue(mailed))
    ledger_announce([credit.pk for credit in credits])
    return replace(note, issued=True)


class SpanRow(TypedDict):
    span: ImpairedSpan
    credit: LedgerEntry | None


class ImpairedTime(TypedDict):
    spans: list[SpanRow]
    pending: CreditNote | None


def impaired_time_of(allocation: Allocation) -> ImpairedTime | None:
    """What the owner's page shows of the impaired time: the spans (those that are impaired
    time: not the ones shorter than IMPAIRED_MIN_SECONDS), each with its credit when issued,
    and the note that staff would issue now (read before it is issued); None for an
    allocation that was never impaired (one query)."""
    spans = sorted(
        (s for s in allocation.impaired_spans.all() if span_counts(s)), key=lambda s: s.started_at
    )
    if not spans:
        return None
    try:
        pending = credit_note_build(allocation=allocation)
    except DomainError:
        pending = None
    rows: list[SpanRow] = [{"span": s, "credit": next(iter(s.credits.all()), None)} for s in spans]
    return {"spans": rows, "pending": pending}
