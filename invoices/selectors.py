"""Reads of the acting team's invoices and credit notes."""

import re
from datetime import date

from django.db.models import Prefetch, QuerySet
from django.utils.translation import gettext as _

from accounts.access import Acting, Action
from invoices.errors import BadMonth, InvoiceNotFound
from invoices.models import Invoice, InvoiceLine

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
    qs = Invoice.objects.filter(team=acting.team).select_related("corrects", "ksef")
    span = month_parse(month)
    if span:
        qs = qs.filter(issued_on__gte=span[0], issued_on__lt=span[1])
    if kind:
        qs = qs.filter(kind=kind)
    return qs


def invoice_documents(*, acting: Acting, month: str) -> QuerySet[Invoice]:
    """One month's documents with their lines, for the zip, oldest first."""
    if not month:
        raise BadMonth(_("Choose a month."), field="month")
    return (
        invoice_list(acting=acting, month=month)
        .prefetch_related(Prefetch("lines", queryset=InvoiceLine.objects.order_by("position")))
        .order_by("issued_at", "id")
    )


def invoice_get(*, acting: Acting, pk: int) -> Invoice:
    acting.require(Action.READ_INVOICES)
    invoice = (
        Invoice.objects.filter(team=acting.team, pk=pk)
        .select_related("corrects__ksef", "ksef")
        .prefetch_related("lines")
        .first()
    )
    if invoice is None:
        raise InvoiceNotFound(_("There is no such invoice in this team."))
    return invoice
