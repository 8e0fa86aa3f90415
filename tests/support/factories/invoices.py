"""Invoices for tests: exchange rates, and documents made directly (the ORM may INSERT; the
trigger refuses only changes) for the tests of the PDF, the XML and immutability that need
exact, chosen facts."""

import zoneinfo
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from invoices.models import ExchangeRate, Invoice, InvoiceKind, InvoiceLine
from rentals.models import LedgerEntry, LedgerKind, LedgerReason

SELLER = {
    "name": "AnchorGPU Demo Sp. z o.o.",
    "address": "ul. Żelazna 1\n00-001 Warszawa",
    "country": "PL",
    "vat_id": "PL5260250274",
    "bank_account": "PL61 1090 1014 0000 0712 1981 2874",
}
BUYERS = {
    "domestic": {"team": "Łódź", "name": "Kupiec Łódzki S.A.", "address": "ul. Piotrkowska 5\n90-001 Łódź", "country": "PL", "vat_id": "PL7740001454"},
    "reverse_charge": {"team": "Berlin", "name": "Rechenzentrum GmbH", "address": "Hauptstr. 1\n10115 Berlin", "country": "DE", "vat_id": "DE136695976"},
    "outside_eu": {"team": "NYC", "name": "Compute Inc.", "address": "1 Main St\nNew York, NY", "country": "US", "vat_id": "12-3456789"},
    "consumer": {"team": "jan", "name": "", "address": "", "country": "", "vat_id": ""},
}  # fmt: skip
RATES = {"domestic": "0.23", "consumer": "0.23", "reverse_charge": "0", "outside_eu": "0"}
NOTES = {
    "reverse_charge": "Odwrotne obciążenie (art. 28b ustawy o VAT) / Reverse charge (art. 28b of the Polish VAT Act)",
}
_numbers = iter(range(900000, 999999))


def charge_row(allocation, net, vat):
    return LedgerEntry.objects.create(
        team=allocation.team, user=allocation.user, allocation=allocation,
        period=allocation.period, kind=LedgerKind.CHARGE, amount=net + vat, net=net, vat=vat,
        currency=allocation.quote.currency, quote=allocation.quote,
        reason=LedgerReason.BOOKING, period_count=1, at=allocation.paid_from,
    )  # fmt: skip


def document(
    allocation, *, treatment="domestic", currency="PLN", lines=((2, "100.00"),), corrects=None,
    pln_rate=None, kind=InvoiceKind.INVOICE,
):  # fmt: skip
    """An invoice with GPU lines of (count, unit price), or a credit note mirroring
    `corrects`."""
    rate = Decimal(RATES[treatment])
    if corrects is not None:
        kind, source = InvoiceKind.CREDIT_NOTE, list(corrects.lines.all())
        rows = [(-ln.quantity, ln.unit_price, -ln.net, -ln.vat, ln.facts) for ln in source]
    else:
        rows = []
        for count, price in lines:
            net = Decimal(price) * count
            facts = {"line": "gpu", "count": count, "periods": 1, "model": "H100 80GB",
                     "period_slug": "week", "period_en": "week", "period_pl": "tydzień"}  # fmt: skip
            rows.append(
                (Decimal(count), Decimal(price), net, (net * rate).quantize(Decimal("0.01")), facts)
            )
    net = sum(r[2] for r in rows)
    vat = sum(r[3] for r in rows)
    entry = charge_row(allocation, abs(net), abs(vat))
    number = next(_numbers)
    series = "AG-K" if kind == InvoiceKind.CREDIT_NOTE else "AG"
    invoice = Invoice.objects.create(
        kind=kind, series=series, year=2026, number=number,
        display_number=f"{series}/2026/{number:06d}", team=allocation.team, ledger_entry=entry,
        corrects=corrects, issued_at=allocation.paid_from, issued_on=date(2026, 11, 30),
        sold_on=date(2026, 11, 29), seller=SELLER, buyer=BUYERS[treatment],
        tax_treatment=treatment, vat_rate=rate, currency=currency, net=net, vat=vat,
        gross=net + vat, pln_rate=pln_rate, pln_rate_on=date(2026, 11, 27) if pln_rate else None,
        pln_rate_table="231/A/NBP/2026" if pln_rate else "",
        reason="cancellation" if corrects else "booking", legal_note=NOTES.get(treatment, ""),
    )  # fmt: skip
    for position, (quantity, price, line_net, line_vat, facts) in enumerate(rows, 1):
        InvoiceLine.objects.create(
            invoice=invoice, position=position, facts=facts, quantity=quantity,
            unit_price=price, net=line_net, vat_rate=rate, vat=line_vat, gross=line_net + line_vat,
        )  # fmt: skip
    return invoice


# PLN per unit, as NBP's table A might have it: enough for the tests' invoices.
TEST_PLN_RATES = {
    "USD": "3.6512",
    "EUR": "4.2512",
    "GBP": "4.8931",
    "CHF": "4.5123",
    "JPY": "0.024371",
}


def pln_rates_create(days: int = 10) -> list[ExchangeRate]:
    """Exchange rates for the last `days` days in the invoices' zone: a foreign-currency
    invoice with Polish VAT is issued only with the rate of a day before its sale."""
    today = timezone.now().astimezone(zoneinfo.ZoneInfo(settings.INVOICES["TIME_ZONE"])).date()
    return ExchangeRate.objects.bulk_create(
        ExchangeRate(
            currency=currency, effective_on=today - timedelta(days=back), rate=Decimal(rate),
            table_no=f"{back:03d}/A/NBP/TEST",
        )
        for currency, rate in TEST_PLN_RATES.items()
        for back in range(1, days + 1)
    )  # fmt: skip
