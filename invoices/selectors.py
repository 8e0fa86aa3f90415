"""Reads of the acting team's invoices and credit notes, and of the invoices held for an
exchange rate."""

import re
import zoneinfo
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db.models import (
    Count,
    DecimalField,
    F,
    Max,
    OuterRef,
    Prefetch,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.roles import Acting, Action
from invoices.errors import BadMonth, InvoiceNotFound
from invoices.models import (
    RATE_MAX_AGE_DAYS,
    HeldInvoice,
    Invoice,
    InvoiceKind,
    InvoiceLine,
    InvoicePayment,
    PaymentStatus,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def month_parse(text: str | None) -> tuple[date, date] | None:
    """ "2026-11" → [1 Nov 2026, 1 Dec 2026); empty → None; anything else refused."""
    if not text:
        return None
    match = _MONTH.match(text.strip())
    if not match or not 1 <= int(match[2]) <= 12 or not 2000 <= int(match[1]) <= 9999:
        raise BadMonth(_("Give the month as YYYY-MM, e.g. 2026-11."), field="month")
    year, month = int(match[1]), int(match[2])
    start = date(year, month, 1)
    return start, date(year + month // 12, month % 12 + 1, 1)


def invoice_list(
    *, acting: Acting, month: str | None = None, kind: str | None = None
) -> QuerySet[Invoice]:
    """The team's documents, newest first; `month` (YYYY-MM, by issue date) and `kind`
    narrow them."""
    acting.require(Action.READ_INVOICES)
    qs = with_payment_facts(
        Invoice.objects.filter(team=acting.team).select_related("corrects", "ksef")
    )
    span = month_parse(month)
    if span:
        qs = qs.filter(issued_on__gte=span[0], issued_on__lt=span[1])
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def this_month() -> str:
    """YYYY-MM of today in the invoices' time zone (their issue dates' zone)."""
    zone = zoneinfo.ZoneInfo(settings.INVOICES["TIME_ZONE"])
    return timezone.now().astimezone(zone).strftime("%Y-%m")


def invoice_documents(*, acting: Acting, month: str) -> QuerySet[Invoice]:
    """One month's numbered documents with their lines, for the zip, oldest first (one
    still being numbered has no file yet)."""
    if not month:
        raise BadMonth(_("Choose a month."), field="month")
    return (
        invoice_list(acting=acting, month=month)
        .filter(number__isnull=False)
        .prefetch_related(Prefetch("lines", queryset=InvoiceLine.objects.order_by("position")))
        .order_by("issued_at", "id")
    )


def invoice_get(*, acting: Acting, pk: int) -> Invoice:
    acting.require(Action.READ_INVOICES)
    invoice = (
        with_payment_facts(Invoice.objects.filter(team=acting.team, pk=pk))
        .select_related("corrects__ksef", "ksef")
        .prefetch_related("lines")
        .first()
    )
    if invoice is None:
        raise InvoiceNotFound(_("There is no such invoice in this team."))
    return invoice


_MONEY: "DecimalField[Decimal, Decimal]" = DecimalField(max_digits=18, decimal_places=4)


def _summed(queryset: QuerySet[Any], field: str) -> Coalesce:
    return Coalesce(
        Subquery(queryset.values(field).annotate(total=Sum("amount")).values("total")[:1]),
        Decimal(0),
        output_field=_MONEY,
    )


class PaymentFacts(TypedDict):
    """What `with_payment_facts` adds to each invoice."""

    applied: Decimal
    credited: Decimal
    last_paid_on: date | None
    allocation_id: int | None


if TYPE_CHECKING:
    # An invoice read by `with_payment_facts`.
    InvoiceWithFacts = WithAnnotations[Invoice, PaymentFacts]


def with_payment_facts(qs: QuerySet[Invoice]) -> "QuerySet[InvoiceWithFacts]":
    """Invoices annotated with what was applied to them (`applied`), what their credit notes
    took off (`credited`, negative), the last payment's day (`last_paid_on`) and the
    allocation they bill (`allocation_id`): `payment_status_of` reads these."""
    applied = InvoicePayment.objects.filter(invoice=OuterRef("pk"))
    credited = Invoice.objects.filter(corrects=OuterRef("pk"), kind=InvoiceKind.CREDIT_NOTE)
    return qs.annotate(
        applied=_summed(applied, "invoice"),
        credited=Coalesce(
            Subquery(credited.values("corrects").annotate(total=Sum("gross")).values("total")[:1]),
            Decimal(0),
            output_field=_MONEY,
        ),
        last_paid_on=Subquery(
            applied.values("invoice").annotate(last=Max("paid_on")).values("last")[:1]
        ),
        allocation_id=F("ledger_entry__allocation_id"),
    )


def invoice_today() -> date:
    """Today in the invoices' time zone: the day due dates are compared with."""
    zone = zoneinfo.ZoneInfo(settings.INVOICES["TIME_ZONE"])
    return timezone.now().astimezone(zone).date()


def invoice_owed(invoice: "InvoiceWithFacts") -> Decimal:
    """What is still to pay on an invoice annotated by `with_payment_facts`: its gross less
    its credit notes and what was applied (never below zero: over-payments stay on the
    team's cash ledger)."""
    if invoice.kind != InvoiceKind.INVOICE:
        return Decimal(0)
    owed: Decimal = invoice.gross + invoice.credited - invoice.applied
    return max(owed, Decimal(0))


def payment_status_of(
    invoice: "InvoiceWithFacts", *, today: date | None = None, grace_days: int = 0
) -> PaymentStatus:
    """unpaid, partially_paid, paid or overdue, from the facts `with_payment_facts` adds."""
    if invoice.kind != InvoiceKind.INVOICE or invoice_owed(invoice) == 0:
        return PaymentStatus.PAID
    today = today or invoice_today()
    if invoice.due_on is not None and invoice.due_on + timedelta(days=grace_days) < today:
        return PaymentStatus.OVERDUE
    return PaymentStatus.PARTIALLY_PAID if invoice.applied > 0 else PaymentStatus.UNPAID


def paid_on_of(invoice: "InvoiceWithFacts") -> date | None:
    """The day the invoice was paid in full (its last payment's), or None."""
    if invoice.kind != InvoiceKind.INVOICE or invoice_owed(invoice) != 0 or not invoice.applied:
        return None
    return invoice.last_paid_on


@dataclass(frozen=True)
class HeldDay:
    """Invoices held for one currency's rate: the sale day, and the days whose NBP rate
    would do (the last business day before the sale is one of them)."""

    currency: str
    sold_on: date
    invoices: int
    rate_from: date
    rate_until: date


def invoices_held() -> list[HeldDay]:
    """Charges whose invoice waits for an exchange rate, by currency and sale day, oldest
    first: what staff are told (the admin, the staff dashboard, mails, /metrics)."""
    rows = (
        HeldInvoice.objects.values("currency", "sold_on")
        .annotate(invoices=Count("pk"))
        .order_by("sold_on", "currency")
    )
    return [
        HeldDay(
            currency=row["currency"],
            sold_on=row["sold_on"],
            invoices=row["invoices"],
            rate_from=row["sold_on"] - timedelta(days=RATE_MAX_AGE_DAYS),
            rate_until=row["sold_on"] - timedelta(days=1),
        )  # fmt: skip
        for row in rows
    ]


def invoices_held_for(*, acting: Acting) -> int:
    """How many of the team's charges still wait for their invoice (an exchange rate)."""
    acting.require(Action.READ_INVOICES)
    return HeldInvoice.objects.filter(ledger_entry__team=acting.team).count()
