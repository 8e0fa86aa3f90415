import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from rentals.idempotency import idempotency_keys_purge
from rentals.models import Allocation, IdempotencyKey, LedgerEntry
from tests.support.booking import book, key

pytestmark = pytest.mark.django_db


def quote(client, **changes):
    body = {"gpu_model": "h100", "gpu_count": 2, "period": "week", "period_count": 1} | changes
    response = client.post("/api/v1/quotes/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_quote_api_shape_money_as_strings(catalog, alice_api):
    body = quote(alice_api, options=[{"option": "nvme-scratch", "quantity": 2}])
    assert body["net_total"] == "775.76" and body["currency"] == "USD"
    assert (body["vat_rate"], body["vat_total"], body["total"]) == ("0.2300", "178.42", "954.18")
    assert [line["amount"] for line in body["lines"]] == ["725.76", "50.00"]
    assert [line["vat"] for line in body["lines"]] == ["166.92", "11.50"]
    assert {"id", "paid_from", "paid_until", "valid_until", "lines"} <= body.keys()


def test_another_users_quote_is_a_404(catalog, alice_api, bob_api):
    body = quote(alice_api)
    assert bob_api.get(f"/api/v1/quotes/{body['id']}/").status_code == 404
    assert alice_api.get(f"/api/v1/quotes/{body['id']}/").status_code == 200


def test_validation_errors_are_problem_details_with_fields(catalog, alice_api):
    response = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "h100", "gpu_count": 99, "period": "week", "period_count": 1},
        format="json",
    )
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 400 and "gpu_count" in problem["errors"]


def test_no_capacity_is_409_with_earliest_start(catalog, alice_api, bob):
    taken = book(bob, model="l4", count=4, period="day")
    response = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["code"] == "no_capacity"
    assert response.json()["earliest_start"] == taken.paid_until.isoformat()


def test_booking_requires_an_idempotency_key(catalog, alice_api):
    body = quote(alice_api)
    missing = alice_api.post("/api/v1/bookings/", {"quote": body["id"]}, format="json")
    garbage = alice_api.post(
        "/api/v1/bookings/", {"quote": body["id"]}, format="json", HTTP_IDEMPOTENCY_KEY="x" * 300
    )
    assert (missing.status_code, garbage.status_code) == (400, 400)
    assert missing.json()["code"] == "idempotency_key_missing"
    assert Allocation.objects.count() == 0


def test_replay_returns_the_first_response_and_charges_once(catalog, alice_api):
    body = quote(alice_api)
    k = key()
    first = alice_api.post(
        "/api/v1/bookings/", {"quote": body["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    again = alice_api.post(
        "/api/v1/bookings/", {"quote": body["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=f'"{k}"'
    )
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert first.json()["amount"] == body["total"]
    assert Allocation.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_same_key_different_request_is_422(catalog, alice_api):
    one, two = quote(alice_api), quote(alice_api, gpu_count=1)
    k = key()
    alice_api.post("/api/v1/bookings/", {"quote": one["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k)
    response = alice_api.post(
        "/api/v1/bookings/", {"quote": two["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert response.status_code == 422
    assert Allocation.objects.count() == 1


def test_business_refusals_are_replayed_too(catalog, alice_api, bob):
    body = quote(alice_api, gpu_model="l4", gpu_count=4, period="day")
    book(bob, model="l4", count=1, period="day")
    k = key()
    first = alice_api.post(
        "/api/v1/bookings/", {"quote": body["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    again = alice_api.post(
        "/api/v1/bookings/", {"quote": body["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert first.status_code == again.status_code == 409
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"


def test_keys_of_two_users_are_independent(catalog, alice_api, bob_api):
    k = key()
    a = alice_api.post(
        "/api/v1/bookings/",
        {"quote": quote(alice_api)["id"]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=k,
    )
    b = bob_api.post(
        "/api/v1/bookings/", {"quote": quote(bob_api)["id"]}, format="json", HTTP_IDEMPOTENCY_KEY=k
    )
    assert (a.status_code, b.status_code) == (201, 201)
    assert a.json()["id"] != b.json()["id"]


def test_keys_are_purged_after_24_hours(catalog, alice_api):
    alice_api.post(
        "/api/v1/bookings/",
        {"quote": quote(alice_api)["id"]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    )
    assert idempotency_keys_purge(now=timezone.now() + timedelta(hours=23)) == 0
    assert idempotency_keys_purge(now=timezone.now() + timedelta(hours=24, seconds=1)) == 1
    assert IdempotencyKey.objects.count() == 0


def test_owner_acts_staff_reads_others_get_404(catalog, alice, alice_api, bob_api, staff_api):
    allocation = book(alice)
    url = f"/api/v1/allocations/{allocation.pk}/"
    assert bob_api.get(url).status_code == 404
    assert bob_api.post(url + "stop/").status_code == 404
    assert staff_api.get(url).status_code == 200
    assert staff_api.post(url + "stop/").status_code == 403
    response = alice_api.post(url + "stop/")
    assert response.status_code == 200 and response.json()["state"] == "stopped"
    assert response.json()["paid_until"] == alice_api.get(url).json()["paid_until"]
    assert bob_api.get("/api/v1/allocations/").json()["count"] == 0
    assert staff_api.get("/api/v1/allocations/").json()["count"] == 1


def test_state_and_period_are_read_only_to_clients(catalog, alice, alice_api):
    allocation = book(alice)
    response = alice_api.patch(
        f"/api/v1/allocations/{allocation.pk}/", {"state": "expired"}, format="json"
    )
    assert response.status_code == 405
    allocation.refresh_from_db()
    assert allocation.state == "running"


def test_extend_via_api_is_idempotent(catalog, alice, alice_api):
    allocation = book(alice, model="l4", count=1, period="day")
    url = f"/api/v1/allocations/{allocation.pk}/extend/"
    k = key()
    first = alice_api.post(url, {"period_count": 2}, format="json", HTTP_IDEMPOTENCY_KEY=k)
    again = alice_api.post(url, {"period_count": 2}, format="json", HTTP_IDEMPOTENCY_KEY=k)
    assert first.status_code == again.status_code == 200
    allocation.refresh_from_db()
    assert allocation.paid_until - allocation.paid_from == timedelta(days=3)
    assert LedgerEntry.objects.filter(allocation=allocation).count() == 2


def test_cancel_via_api_and_ledger(catalog, alice, alice_api):
    allocation = book(
        alice, model="l4", count=1, period="day", starts_at=timezone.now() + timedelta(days=1)
    )
    assert (
        alice_api.post(f"/api/v1/allocations/{allocation.pk}/cancel/").json()["state"]
        == "cancelled"
    )
    ledger = alice_api.get("/api/v1/ledger/").json()
    assert [e["kind"] for e in ledger["results"]] == ["refund", "charge"]
    assert ledger["balance"] == "0.00"


def test_token_obtain_and_bearer_auth(catalog, api, alice):
    response = api.post(
        "/api/v1/auth/token/", {"username": "alice", "password": "pw-alice-123456"}, format="json"
    )
    assert response.status_code == 201
    token = response.json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/allocations/").status_code == 200
    api.credentials(HTTP_AUTHORIZATION="Bearer nope")
    assert api.get("/api/v1/allocations/").status_code == 401


def test_login_locks_out_after_repeated_failures(catalog, api, alice):
    for _ in range(5):
        bad = api.post(
            "/api/v1/auth/token/", {"username": "alice", "password": "wrong"}, format="json"
        )
        assert bad.status_code in (401, 429)
    good = api.post(
        "/api/v1/auth/token/", {"username": "alice", "password": "pw-alice-123456"}, format="json"
    )
    assert good.status_code == 429


def test_unknown_uuid_and_bad_uuid(catalog, alice_api):
    assert alice_api.get(f"/api/v1/allocations/{uuid.uuid4()}/").status_code == 404
    assert alice_api.get("/api/v1/allocations/not-a-uuid/").status_code == 404


def test_statement_as_csv_through_the_api(catalog, alice, alice_api, api):
    allocation = book(
        alice, model="l4", count=1, period="day", starts_at=timezone.now() + timedelta(days=1)
    )
    alice_api.post(f"/api/v1/allocations/{allocation.pk}/cancel/")
    response = alice_api.get("/api/v1/ledger/csv/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content).decode()
    rows = [line.split(",") for line in body.strip().splitlines()]
    assert rows[0][3] == "amount"
    assert sorted(r[3] for r in rows[1:]) == ["-16.24", "16.24"]  # 13.20 + 23 % VAT
    assert api.get("/api/v1/ledger/csv/").status_code == 401
