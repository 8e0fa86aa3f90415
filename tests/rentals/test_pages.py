"""Page flows through the same services as the API (the browser tests drive the rest)."""

import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.access import acting_as
from catalog.services import gpu_price_set
from rentals.models import Allocation, LedgerEntry, Quote
from rentals.services import quote_create
from tests.rentals.helpers import book

pytestmark = pytest.mark.django_db


def test_expired_quote_is_requoted_with_the_new_total(catalog, alice, client):
    client.force_login(alice)
    # Quoted 16 minutes ago (validity 15): services judge expiry on the database clock.
    quote = quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=2, period="day", period_count=2,
        options=[{"option": "nvme-scratch", "quantity": 3}],
        now=timezone.now() - timedelta(minutes=16),
    )  # fmt: skip
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("20.00"))
    response = client.post(
        f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())}, follow=True
    )
    fresh = Quote.objects.exclude(pk=quote.pk).get()
    assert response.redirect_chain[-1][0] == f"/quotes/{fresh.pk}/"
    assert fresh.total == Decimal("104.00")  # 2×20×2 + 3×4×2
    assert "76.80 USD → 104.00 USD" in response.content.decode().replace("&gt;", ">")
    assert Allocation.objects.count() == 0 and LedgerEntry.objects.count() == 0


def test_stop_start_extend_and_cancel_from_the_page(catalog, alice, bob, client):
    allocation = book(alice, model="l4", count=1, period="day")
    client.force_login(bob)
    assert client.get(f"/allocations/{allocation.pk}/").status_code == 404
    assert client.post(f"/allocations/{allocation.pk}/stop/").status_code == 404
    client.force_login(alice)
    until = allocation.paid_until
    client.post(f"/allocations/{allocation.pk}/stop/")
    allocation.refresh_from_db()
    assert (allocation.state, allocation.paid_until) == ("stopped", until)
    client.post(f"/allocations/{allocation.pk}/start/")
    key = str(uuid.uuid4())
    for _ in range(2):  # a resubmitted extend form extends once
        client.post(
            f"/allocations/{allocation.pk}/extend/", {"period_count": "2", "idempotency_key": key}
        )
    allocation.refresh_from_db()
    assert allocation.paid_until == until + timedelta(days=2)
    response = client.post(f"/allocations/{allocation.pk}/cancel/", follow=True)
    assert "Only a scheduled allocation can be cancelled" in response.content.decode()
    assert client.post(f"/allocations/{allocation.pk}/explode/").status_code == 404


def test_tokens_page_creates_shows_once_and_revokes(alice, client, api):
    client.force_login(alice)
    page = client.post("/account/tokens/", {"name": "laptop"}).content.decode()
    secret = page.split('id="new-token">')[1].split("<")[0]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/v1/ledger/").status_code == 200
    assert secret not in client.get("/account/tokens/").content.decode()
    from accounts.models import ApiToken

    client.post("/account/tokens/", {"revoke": ApiToken.objects.get().pk})
    assert api.get("/api/v1/ledger/").status_code == 401


def test_usage_page_is_for_staff_only(catalog, alice, staff, client):
    client.force_login(alice)
    assert client.get("/usage/").status_code == 302
    client.force_login(staff)
    assert client.get("/usage/?days=30").status_code == 200
    csv = client.get("/usage/?csv=by_model").content.decode()
    assert csv.startswith("model,avg_utilisation_pct,gpu_hours")
