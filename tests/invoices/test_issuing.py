"""Documents issued by the ledger's own transaction (invoices.receivers), against real
PostgreSQL: a credit note per corrected invoice for a refund, and quote total = charge =
invoice gross. Their numbers (given after commit) are test_numbering's."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.roles import acting_as
from invoices.models import Invoice, InvoiceKind
from invoices.services import invoices_number
from rentals.models import ImpairedSpan, LedgerEntry, LedgerKind
from rentals.services import allocation_book, allocation_cancel, allocation_extend, quote_create
from rentals.services.credits import credit_note_issue
from tests.support.booking import book
from tests.support.operators import operator


class Refused(Exception):
    pass


@pytest.fixture(autouse=True)
def _rates(pln_rates):
    """USD charges with Polish VAT are invoiced with the rate of a day before the sale."""


@pytest.mark.django_db
def test_a_refund_of_booking_and_extension_gives_two_credit_notes_that_mirror_them(catalog, alice):
    acting = acting_as(alice)
    quote = quote_create(
        acting=acting, gpu_model="h100", gpu_count=1, period="day", period_count=1,
        starts_at=timezone.now() + timedelta(days=2),
    )  # fmt: skip
    allocation = allocation_book(acting=acting, quote=quote)
    allocation_extend(acting=acting, allocation=allocation, period_count=1)
    invoices_number()  # after the commit, by a worker
    invoices = list(Invoice.objects.filter(kind=InvoiceKind.INVOICE).order_by("number"))
    assert len(invoices) == 2
    allocation_cancel(acting=acting, allocation=allocation)
    invoices_number()
    credits = list(Invoice.objects.filter(kind=InvoiceKind.CREDIT_NOTE).order_by("number"))
    assert [c.corrects_id for c in credits] == [i.pk for i in invoices]
    assert [c.display_number.split("/")[0] for c in credits] == ["AG-K", "AG-K"]
    for credit, invoice in zip(credits, invoices, strict=True):
        assert (credit.net, credit.vat, credit.gross) == (
            -invoice.net,
            -invoice.vat,
            -invoice.gross,
        )
        assert [(ln.net, ln.vat, ln.gross) for ln in credit.lines.all()] == [
            (-ln.net, -ln.vat, -ln.gross) for ln in invoice.lines.all()
        ]
    refund = LedgerEntry.objects.get(kind=LedgerKind.REFUND)
    assert -sum(c.gross for c in credits) == refund.amount


@pytest.mark.django_db
def test_a_credit_for_time_in_an_extension_corrects_the_extension_s_invoice(catalog, alice):
    acting = acting_as(alice)
    allocation = book(alice, model="h100", count=1, period="day")
    allocation = allocation_extend(acting=acting, allocation=allocation, period_count=1)
    booking_invoice, extension_invoice = Invoice.objects.filter(kind=InvoiceKind.INVOICE).order_by(
        "number"
    )
    start = allocation.paid_until - timedelta(hours=10)  # inside the extension's day
    ImpairedSpan.objects.create(
        allocation=allocation, started_at=start, ended_at=start + timedelta(hours=2),
        gpus=[h.gpu_id for h in allocation.current_holdings],
    )  # fmt: skip

    credit_note_issue(operator=operator(), allocation_id=allocation.pk)

    note = Invoice.objects.get(kind=InvoiceKind.CREDIT_NOTE)
    assert note.corrects_id == extension_invoice.pk != booking_invoice.pk
    credit = LedgerEntry.objects.get(kind=LedgerKind.CREDIT)
    assert (note.net, note.vat, note.gross) == (-credit.net, -credit.vat, -credit.amount)


@pytest.mark.django_db
@pytest.mark.parametrize("currency", ["PLN", "EUR", "USD", "JPY"])
def test_quote_total_equals_charge_equals_invoice_gross(catalog, alice, settings, currency):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "CURRENCY": currency}
    acting = acting_as(alice)
    quote = quote_create(acting=acting, gpu_model="h100", gpu_count=3, period="day", period_count=1)
    allocation = allocation_book(acting=acting, quote=quote)
    charge = LedgerEntry.objects.get(allocation=allocation, kind=LedgerKind.CHARGE)
    invoice = Invoice.objects.get(ledger_entry=charge)
    assert quote.total == charge.amount == invoice.gross
    assert invoice.currency == quote.currency
    assert sum(ln.gross for ln in invoice.lines.all()) == invoice.gross
    if quote.currency == "JPY":
        assert invoice.gross == invoice.gross.to_integral_value()
    assert invoice.net + invoice.vat == invoice.gross != Decimal(0)
