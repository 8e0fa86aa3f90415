"""An invoice in a foreign currency with Polish VAT states that VAT in PLN (FA(3)'s P_14_1W)
at the NBP rate of the last business day before the sale. Without such a rate it is held,
never issued without it: the booking stands, staff are told (once, by mail, and on the staff
pages), the customer reads why, and the rate entered in the admin issues it at once, with its
credit notes."""

import zoneinfo
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import Permission
from django.core import mail
from django.utils import timezone
from lxml import etree

from accounts.roles import acting_as
from invoices import fa3
from invoices.models import ExchangeRate, HeldInvoice, Invoice, InvoiceKind
from invoices.selectors import invoices_held
from invoices.services import exchange_rates_demo_keep, invoices_held_alert, invoices_number
from rentals.models import LedgerEntry, LedgerKind
from rentals.services import allocation_cancel
from tests.support.booking import book
from tests.support.factories.accounts import person

pytestmark = pytest.mark.django_db
NS = {"fa": "http://crd.gov.pl/wzor/2025/06/25/13775/"}


def _today():
    zone = zoneinfo.ZoneInfo(django_settings.INVOICES["TIME_ZONE"])
    return timezone.now().astimezone(zone).date()


@pytest.fixture
def keeper(db):
    """A staff member who keeps the exchange rates."""
    user = person("billing-ops", "pw-billing-ops-123", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="invoices",
            codename__in=["add_exchangerate", "view_exchangerate", "view_invoice"],
        )
    )
    return user


def test_without_a_rate_the_invoice_is_held_staff_are_told_and_a_rate_issues_it(
    catalog, alice, staff, keeper, client, settings
):
    ExchangeRate.objects.create(  # a rate, but weeks old: not the day before the sale
        currency="USD", effective_on=_today() - timedelta(days=20), rate=Decimal("3.90")
    )
    allocation = book(alice)  # 446.34 USD with 83.46 of VAT

    charge = LedgerEntry.objects.get(allocation=allocation, kind=LedgerKind.CHARGE)
    assert not Invoice.objects.filter(ledger_entry=charge).exists()  # never without P_14_1W
    held = HeldInvoice.objects.get()
    assert (held.ledger_entry_id, held.currency, held.sold_on) == (charge.pk, "USD", _today())
    (day,) = invoices_held()
    assert (day.invoices, day.rate_until) == (1, _today() - timedelta(days=1))

    # Staff are told once, by mail; the staff pages say so.
    assert invoices_held_alert() == 1
    (alert,) = mail.outbox
    assert alert.to == [keeper.email] and "held" in alert.subject
    assert f"USD, sold on {_today():%Y-%m-%d}: 1 held" in alert.body
    assert invoices_held_alert() == 0 and len(mail.outbox) == 1
    client.force_login(staff)
    usage = client.get("/usage/").content.decode()
    assert 'id="held-invoices"' in usage and f"USD, sold on {_today():%Y-%m-%d}: 1 held" in usage
    client.force_login(keeper)
    index = client.get("/admin/").content.decode()
    assert 'id="held-invoices"' in index and "/admin/invoices/exchangerate/add/" in index
    listing = client.get("/admin/invoices/exchangerate/").content.decode()
    assert "1 held" in listing
    settings.ANCHORGPU = {**settings.ANCHORGPU, "METRICS_TOKEN": "s3cret-for-prometheus"}
    metrics = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-for-prometheus")
    assert 'anchorgpu_invoices_held{currency="USD"} 1.0' in metrics.content.decode()
    # The customer reads why there is no invoice yet.
    client.force_login(alice)
    page = client.get("/invoices/").content.decode()
    assert 'id="invoices-held"' in page and "One charge waits for its invoice" in page

    # The rate of the day before the sale, entered in the admin, issues it at once.
    client.force_login(keeper)
    yesterday = _today() - timedelta(days=1)
    added = client.post(
        "/admin/invoices/exchangerate/add/",
        {"currency": "USD", "effective_on": yesterday.isoformat(), "rate": "3.6512",
         "table_no": "233/A/NBP/2026"},
        follow=True,
    )  # fmt: skip
    assert "1 held documents issued with this rate." in added.content.decode()
    invoices_number()  # after the commit, by a worker
    invoice = Invoice.objects.get(ledger_entry=charge)
    assert (invoice.pln_rate, invoice.pln_rate_on) == (Decimal("3.6512"), yesterday)
    root = etree.fromstring(fa3.invoice_xml(invoice))
    assert root.findtext("fa:Fa/fa:P_14_1W", namespaces=NS) == "304.73"  # 83.46 × 3.6512
    assert not HeldInvoice.objects.exists() and invoices_held() == []
    client.force_login(alice)
    assert 'id="invoices-held"' not in client.get("/invoices/").content.decode()


def test_a_refund_of_a_held_charge_waits_for_its_invoice_and_then_corrects_it(catalog, alice):
    from invoices.services import invoices_issue_missing

    allocation = book(alice, starts_at=timezone.now() + timedelta(days=2))
    allocation_cancel(acting=acting_as(alice), allocation=allocation)
    assert not Invoice.objects.exists()  # no credit note for an invoice not issued

    ExchangeRate.objects.create(
        currency="USD", effective_on=_today() - timedelta(days=3), rate=Decimal("3.70")
    )
    assert invoices_issue_missing() == 2
    invoice = Invoice.objects.get(kind=InvoiceKind.INVOICE)
    note = Invoice.objects.get(kind=InvoiceKind.CREDIT_NOTE)
    assert note.corrects_id == invoice.pk and note.gross == -invoice.gross
    assert note.pln_rate == invoice.pln_rate == Decimal("3.70")
    assert invoices_issue_missing() == 0  # nothing twice


@pytest.mark.parametrize(
    "currency, details",
    [
        ("PLN", {}),  # VAT in PLN already
        ("USD", {"legal_name": "Acme GmbH", "address": "Hauptstr. 1", "country": "DE",
                 "vat_id": "DE136695976"}),  # reverse charge: no VAT to convert
    ],
)  # fmt: skip
def test_no_rate_is_needed_without_foreign_currency_vat(catalog, alice, currency, details):
    from accounts.services.teams import team_buyer_set
    from catalog.services import gpu_price_set

    gpu_price_set(
        gpu_model=catalog.h100, period=catalog.week, unit_price=Decimal("1000.00"),
        currency=currency,
    )  # fmt: skip
    if details:
        team_buyer_set(acting=acting_as(alice), **details)
    allocation = book(alice)
    assert Invoice.objects.filter(ledger_entry__allocation=allocation).count() == 1
    assert not HeldInvoice.objects.exists()


def test_the_demo_keeps_rates_for_its_currencies(catalog, alice, settings):
    assert exchange_rates_demo_keep() == 0  # not the demo: staff enter the rates
    settings.ANCHORGPU = {**settings.ANCHORGPU, "DEMO": True}

    added = exchange_rates_demo_keep()

    days = list(ExchangeRate.objects.filter(currency="USD").values_list("effective_on", flat=True))
    assert added == len(days) >= 28 and all(day.weekday() < 5 for day in days)
    assert all("(demo)" in r.table_no for r in ExchangeRate.objects.all())
    assert exchange_rates_demo_keep() == 0  # kept, not added twice
    allocation = book(alice)
    invoice = Invoice.objects.get(ledger_entry__allocation=allocation)
    assert invoice.pln_rate is not None and invoice.pln_rate_on < _today()
