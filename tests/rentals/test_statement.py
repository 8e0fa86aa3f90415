"""The statement and the allocation lists page through everything, by date range, kind and
state, as pages, CSV and API; staff filter every allocation by owner, model and node."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from rentals.models import LedgerEntry, LedgerKind
from tests.rentals.helpers import book

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_ledger(catalog, alice):
    """75 rows: the booking's charge today plus a refund-free history of 74 days."""
    allocation = book(alice, model="l4", count=1, period="day")
    start = datetime(2026, 1, 1, 12, tzinfo=UTC)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            team=allocation.team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
            amount=Decimal("1.00"), net=Decimal("1.00"), vat=0, currency="USD",
            quote=allocation.quote, reason="booking", period_count=1,
            at=start + timedelta(days=n),
        )
        for n in range(74)
    )  # fmt: skip
    return allocation


def test_the_statement_pages_through_every_row(long_ledger, client, alice):
    client.force_login(alice)
    first = client.get("/statement/")
    assert len(first.context["entries"]) == 50 and "Page 1 of 2 (75 rows)" in first.content.decode()
    second = client.get("/statement/?page=2")
    assert len(second.context["entries"]) == 25


def test_a_date_range_narrows_the_page_its_net_and_the_csv(long_ledger, client, alice):
    client.force_login(alice)
    page = client.get("/statement/?since=2026-01-01&until=2026-01-10")
    assert len(page.context["entries"]) == 10
    assert page.context["range_net"] == Decimal("10.00")
    assert page.context["balance"] == Decimal("90.24")  # 74 × 1.00 + 13.20 + 3.04 VAT, all time
    csv = b"".join(
        client.get("/statement.csv?since=2026-01-01&until=2026-01-10").streaming_content
    ).decode()
    assert len(csv.strip().splitlines()) == 11  # header + 10 rows
    backwards = client.get("/statement/?since=2026-02-01&until=2026-01-01")
    assert backwards.status_code == 400


def test_the_api_filters_the_ledger_by_range_and_kind(long_ledger, alice_api):
    body = alice_api.get("/api/v1/ledger/?since=2026-01-05&until=2026-01-06&kind=charge").json()
    assert body["count"] == 2 and body["range_net"] == "2.00" and body["balance"] == "90.24"
    assert alice_api.get("/api/v1/ledger/?kind=refund").json()["count"] == 0
    assert alice_api.get("/api/v1/ledger/?since=2026-13-01").status_code == 400
    csv = alice_api.get("/api/v1/ledger/csv/?since=2026-01-05&until=2026-01-05")
    assert len(b"".join(csv.streaming_content).decode().strip().splitlines()) == 2


def test_staff_filter_every_allocation_by_owner_model_and_node(catalog, alice, bob, staff, client):
    alices = book(alice, model="l4", count=1, period="day")
    bobs = book(bob, model="h100", count=1, period="day")
    client.force_login(staff)
    assert {a.pk for a in client.get("/allocations/").context["allocations"]} == {
        alices.pk,
        bobs.pk,
    }
    assert [a.pk for a in client.get("/allocations/?user=bob").context["allocations"]] == [bobs.pk]
    by_model = client.get("/allocations/?gpu_model=l4").context["allocations"]
    assert [a.pk for a in by_model] == [alices.pk]
    by_node = client.get(f"/allocations/?node={bobs.node.hostname}").context["allocations"]
    assert [a.pk for a in by_node] == [bobs.pk]
    client.force_login(alice)
    assert [a.pk for a in client.get("/allocations/?user=bob").context["allocations"]] == []


def test_balances_are_per_currency_and_never_added_across(catalog, alice, alice_api, client):
    allocation = book(alice, model="l4", count=1, period="day")  # 13.20 USD + 23 % VAT
    LedgerEntry.objects.create(
        team=allocation.team, user=alice, allocation=allocation, kind=LedgerKind.CHARGE,
        amount=Decimal("5.00"), net=Decimal("5.00"), vat=0, currency="EUR",
        quote=allocation.quote, reason="booking", period_count=1, at=allocation.paid_from,
    )  # fmt: skip
    body = alice_api.get("/api/v1/ledger/").json()
    assert body["balances"] == [
        {"currency": "EUR", "amount": "5.00"},
        {"currency": "USD", "amount": "16.24"},
    ]
    assert body["balance"] is None  # no single number for two currencies
    client.force_login(alice)
    page = client.get("/statement/").content.decode()
    assert "5.00 EUR" in page and "16.24 USD" in page and "21.24" not in page
