"""One idempotency layer for every purchase: the API and the pages replay the response the
client saw, refusals included, byte for byte."""

import uuid

import pytest

from accounts.roles import acting_as
from rentals.models import Allocation, IdempotencyKey, LedgerEntry
from rentals.services import quote_create
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def _quote(user):
    return quote_create(
        acting=acting_as(user), gpu_model="l4", gpu_count=1, period="day", period_count=1
    )


def test_a_refused_booking_replays_its_refusal_through_the_api(catalog, alice, alice_api):
    quote = _quote(alice)
    assert (
        alice_api.post(
            "/api/v1/bookings/", {"quote": str(quote.pk)}, format="json",
            HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
        ).status_code
        == 201
    )  # fmt: skip
    key = str(uuid.uuid4())
    first, again = (
        alice_api.post(
            "/api/v1/bookings/", {"quote": str(quote.pk)}, format="json", HTTP_IDEMPOTENCY_KEY=key
        )
        for _ in range(2)
    )
    assert first.status_code == again.status_code == 409
    assert first.json()["code"] == "quote_used"
    assert first["Content-Type"] == again["Content-Type"] == "application/problem+json"
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Allocation.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_a_refused_booking_replays_its_refusal_through_the_page(catalog, alice, client):
    client.force_login(alice)
    quote = _quote(alice)
    client.post(f"/quotes/{quote.pk}/book/", {"idempotency_key": str(uuid.uuid4())})
    key = str(uuid.uuid4())
    first, again = (
        client.post(f"/quotes/{quote.pk}/book/", {"idempotency_key": key}) for _ in range(2)
    )
    assert first.status_code == again.status_code == 302
    assert (
        first["Location"]
        == again["Location"]
        == ("/book/l4/?gpu_count=1&period=day&period_count=1")
    )
    assert again.content == first.content
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Allocation.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_a_refused_extension_page_is_replayed_byte_for_byte(catalog, alice, client):
    allocation = book(alice, model="l4", count=1, period="day")
    client.force_login(alice)
    url, key = f"/allocations/{allocation.pk}/extend/", str(uuid.uuid4())
    first, again = (
        client.post(url, {"period_count": "9999", "idempotency_key": key}) for _ in range(2)
    )
    assert first.status_code == again.status_code == 400
    assert "Ensure this value is less than or equal to 52." in first.content.decode()
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    allocation.refresh_from_db()
    assert allocation.ledger.count() == 1


def test_the_same_key_for_another_request_is_refused_and_changes_nothing(catalog, alice, alice_api):
    first, second = _quote(alice), _quote(alice)
    key = str(uuid.uuid4())
    alice_api.post(
        "/api/v1/bookings/", {"quote": str(first.pk)}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    other = alice_api.post(
        "/api/v1/bookings/", {"quote": str(second.pk)}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert Allocation.objects.count() == 1 and IdempotencyKey.objects.count() == 1


def test_an_input_error_is_not_stored_so_a_corrected_retry_works(catalog, alice, alice_api):
    quote, key = _quote(alice), str(uuid.uuid4())
    bad = alice_api.post(
        "/api/v1/bookings/", {"quote": "not-a-uuid"}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert bad.status_code == 400 and IdempotencyKey.objects.count() == 0
    good = alice_api.post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )
    assert good.status_code == 201
