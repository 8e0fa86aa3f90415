"""Money and state are decided on the database's clock; quotes cannot be used to flood or
to make the database work without bound."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from rest_framework.throttling import ScopedRateThrottle

from accounts.roles import acting_as
from rentals.models import Allocation, LedgerEntry, Quote
from rentals.services import quote_create, quotes_expired_purge
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def test_a_web_server_clock_ahead_does_not_refuse_a_cancel_that_is_due(catalog, alice, client):
    scheduled = book(
        alice, model="l4", count=1, period="day", starts_at=timezone.now() + timedelta(hours=1)
    )
    client.force_login(alice)
    # This web server's clock runs two hours fast; the database's says the start is ahead.
    with time_machine.travel(timezone.now() + timedelta(hours=2), tick=False):
        client.post(f"/allocations/{scheduled.pk}/cancel/")
    scheduled.refresh_from_db()
    assert scheduled.state == "cancelled"
    assert LedgerEntry.objects.filter(allocation=scheduled, kind="refund").count() == 1


def test_a_web_server_clock_behind_does_not_book_an_expired_quote(catalog, alice, alice_api):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )
    with time_machine.travel(timezone.now() - timedelta(hours=1), tick=False):
        Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() + timedelta(minutes=5))
    # valid_until is now 55 minutes in the past by the database's clock.
    response = alice_api.post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, HTTP_IDEMPOTENCY_KEY=str(quote.pk)
    )
    assert response.status_code == 409 and response.json()["code"] == "quote_expired"
    assert Allocation.objects.count() == 0


def test_quotes_are_throttled(catalog, alice_api, monkeypatch):
    # DRF reads the rates once, at import; QUOTE_THROTTLE_RATE sets them in production.
    rates = {**ScopedRateThrottle.THROTTLE_RATES, "quote": "3/min"}
    monkeypatch.setattr(ScopedRateThrottle, "THROTTLE_RATES", rates)
    body = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}
    statuses = [alice_api.post("/api/v1/quotes/", body).status_code for _ in range(5)]
    assert statuses == [201, 201, 201, 429, 429]


def test_a_quote_takes_a_bounded_number_of_options(catalog, alice_api):
    body = {
        "gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1,
        "options": [{"option": f"o{n}", "quantity": 1} for n in range(51)],
    }  # fmt: skip
    response = alice_api.post("/api/v1/quotes/", body)
    assert response.status_code == 400 and "options" in response.json()["errors"]
    assert Quote.objects.count() == 0


def test_no_capacity_costs_a_bounded_number_of_queries(
    catalog, alice, bob, django_assert_max_num_queries
):
    for periods in (1, 2):  # every L4 taken, by holdings that end at different times
        book(bob, model="l4", count=2, period="day", periods=periods)
    acting = acting_as(alice)
    with django_assert_max_num_queries(12), pytest.raises(Exception, match="Not enough free"):
        quote_create(acting=acting, gpu_model="l4", gpu_count=2, period="day", period_count=1)


def test_expired_unbooked_quotes_are_purged_and_booked_ones_kept(catalog, alice):
    stale = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )
    booked = book(alice, model="h100", count=1, period="day")
    assert quotes_expired_purge(now=timezone.now() + timedelta(days=3)) >= 1
    assert not Quote.objects.filter(pk=stale.pk).exists()
    assert Quote.objects.filter(pk=booked.quote_id).exists()
