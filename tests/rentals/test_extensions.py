"""An extension is priced by a quote the customer reads first and charges exactly its
total; an option without a current price is refused, never dropped."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import OptionPrice
from catalog.services import gpu_price_set
from core.errors import Invalid
from rentals.errors import QuoteExpired, QuoteUsed
from rentals.models import LedgerEntry, Quote
from rentals.services import allocation_extend, extension_quote_create
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def _allocation(alice):
    return book(
        alice, model="l4", count=1, period="day",
        options=[{"option": "nvme-scratch", "quantity": 2}],
    )  # fmt: skip


def test_the_api_quotes_an_extension_and_charges_exactly_its_total(catalog, alice, alice_api):
    allocation = _allocation(alice)
    quoted = alice_api.post(
        f"/api/v1/allocations/{allocation.pk}/extension-quotes/", {"period_count": 2}
    )
    assert quoted.status_code == 201
    body = quoted.json()
    assert body["kind"] == "extension" and body["extends"] == str(allocation.pk)
    assert body["paid_from"] == allocation.paid_until.isoformat().replace("+00:00", "Z")
    assert [line["amount"] for line in body["lines"]] == ["26.40", "16.00"]  # 2×13.20, 2×2×4.00
    assert (body["net_total"], body["vat_total"], body["total"]) == ("42.40", "9.75", "52.15")
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("99.00"))
    extended = alice_api.post(
        f"/api/v1/allocations/{allocation.pk}/extend/", {"quote": body["id"]},
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )  # fmt: skip
    assert extended.status_code == 200
    charge = LedgerEntry.objects.filter(allocation=allocation).latest("id")
    assert charge.amount == Decimal("52.15")  # the quote read, not today's new price
    allocation.refresh_from_db()
    assert allocation.paid_until == Quote.objects.get(pk=body["id"]).paid_until


def test_a_period_count_body_charges_what_a_quote_at_that_moment_shows(catalog, alice, alice_api):
    allocation = _allocation(alice)
    preview = extension_quote_create(acting=acting_as(alice), allocation=allocation, period_count=1)
    alice_api.post(
        f"/api/v1/allocations/{allocation.pk}/extend/", {"period_count": 1},
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )  # fmt: skip
    charge = LedgerEntry.objects.filter(allocation=allocation).latest("id")
    assert charge.amount == preview.total == Decimal("26.08")  # 21.20 + 23 % VAT


def test_an_extension_quote_is_used_once_and_expires(catalog, alice):
    allocation = _allocation(alice)
    acting = acting_as(alice)
    quote = extension_quote_create(acting=acting, allocation=allocation, period_count=1)
    allocation_extend(acting=acting, allocation=allocation, quote=quote)
    with pytest.raises((QuoteUsed, QuoteExpired)):
        allocation_extend(acting=acting, allocation=allocation, quote=quote)
    stale = extension_quote_create(
        acting=acting, allocation=allocation, period_count=1,
        now=timezone.now() - timedelta(minutes=16),
    )  # fmt: skip
    before = LedgerEntry.objects.count()
    with pytest.raises(QuoteExpired):
        allocation_extend(acting=acting, allocation=allocation, quote=stale)
    assert LedgerEntry.objects.count() == before


def test_an_option_without_a_current_price_is_refused_not_dropped(catalog, alice):
    allocation = _allocation(alice)
    OptionPrice.objects.filter(option=catalog.scratch, period=catalog.day).delete()
    with pytest.raises(Invalid, match="has no price"):
        extension_quote_create(acting=acting_as(alice), allocation=allocation, period_count=1)
    assert not Quote.objects.filter(kind="extension").exists()


def test_an_extension_quote_cannot_be_booked_as_a_new_allocation(catalog, alice, alice_api):
    allocation = _allocation(alice)
    quote = extension_quote_create(acting=acting_as(alice), allocation=allocation, period_count=1)
    response = alice_api.post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert response.status_code == 400 and LedgerEntry.objects.count() == 1


def test_the_page_shows_the_extension_price_before_charging_it(catalog, alice, client):
    allocation = _allocation(alice)
    client.force_login(alice)
    response = client.post(f"/allocations/{allocation.pk}/extension-quote/", {"period_count": "1"})
    quote = Quote.objects.get(kind="extension")
    assert response["Location"] == f"/quotes/{quote.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "Your extension quote" in page and "21.20" in page and "26.08" in page
    assert LedgerEntry.objects.count() == 1  # nothing charged by reading
    client.post(
        f"/allocations/{allocation.pk}/extend/",
        {"quote": str(quote.pk), "idempotency_key": str(uuid.uuid4())},
    )
    assert LedgerEntry.objects.latest("id").amount == Decimal("26.08")
