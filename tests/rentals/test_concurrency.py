"""Races against real PostgreSQL: threads through the service and concurrent HTTP clients."""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, transaction
from django.http import JsonResponse
from django.utils import timezone

from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from catalog.models import Node, NodeState
from rentals.idempotency import respond_once
from rentals.models import Allocation, IdempotencyKey, LedgerEntry
from rentals.services import allocation_book, quote_create
from tests.support.factories.accounts import UserFactory
from tests.support.races import in_thread, overlapping_pairs, race_to_book

pytestmark = pytest.mark.django_db(transaction=True)


def test_threads_race_for_the_last_gpus(catalog):
    users = UserFactory.create_batch(12)
    quotes = [
        quote_create(acting=acting_as(u), gpu_model="l4", gpu_count=1, period="day", period_count=1)
        for u in users
    ]
    results = race_to_book(users, quotes)

    assert results.count("ok") == 4  # the L4 node has 4 GPUs
    assert results.count("no_capacity") == 8
    assert Allocation.objects.count() == 4 == LedgerEntry.objects.count()
    assert overlapping_pairs() == 0


def test_http_clients_race_for_the_last_gpus(catalog, live_server):
    users = UserFactory.create_batch(10)
    tokens = [api_token_create(user=u, name="race") for u in users]
    barrier = threading.Barrier(len(users))

    def attempt(i):
        headers = {"Authorization": f"Bearer {tokens[i]}"}
        with httpx.Client(base_url=live_server.url, headers=headers, timeout=30) as client:
            quote = client.post(
                "/api/v1/quotes/",
                json={"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1},
            ).json()
            barrier.wait()
            response = client.post(
                "/api/v1/bookings/",
                json={"quote": quote["id"]},
                headers={"Idempotency-Key": str(uuid.uuid4())},
            )
            return response.status_code, response.json().get("code")

    with ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(attempt, range(len(users))))

    assert sorted(results, key=str).count((201, None)) == 4
    assert [r for r in results if r[0] != 201] == [(409, "no_capacity")] * 6
    assert overlapping_pairs() == 0


def test_two_identical_requests_at_once_book_once(catalog, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )
    key = str(uuid.uuid4())
    inside = threading.Event()
    release = threading.Event()

    def slow_book():
        inside.set()
        release.wait(10)
        allocation = allocation_book(acting=acting_as(alice), quote=quote)
        return JsonResponse({"id": str(allocation.pk)}, status=201)

    @in_thread
    def first():
        return respond_once(acting=acting_as(alice), key=key, fingerprint="f", respond=slow_book)

    @in_thread
    def second():
        inside.wait(10)
        try:
            return respond_once(
                acting=acting_as(alice), key=key, fingerprint="f", respond=slow_book
            )
        except Exception as exc:  # the in-flight refusal is what we expect
            return exc
        finally:
            release.set()

    with ThreadPoolExecutor(2) as pool:
        one, two = pool.submit(first), pool.submit(second)
        results = [one.result(), two.result()]

    assert results[0].status_code == 201 and "Idempotent-Replayed" not in results[0]
    assert getattr(results[1], "code", None) == "in_flight" and results[1].status == 409
    assert Allocation.objects.count() == 1
    replay = respond_once(acting=acting_as(alice), key=key, fingerprint="f", respond=slow_book)
    assert replay["Idempotent-Replayed"] == "true" and replay.content == results[0].content


def test_a_first_answer_committed_after_the_look_up_is_replayed_not_doubled(catalog, alice):
    """The first request's row committed after our look-up's snapshot (here: while we
    book): our claim inserts nothing, so our booking is rolled back and its answer replayed."""
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )
    key = str(uuid.uuid4())
    calls = []

    @in_thread
    def first_answer_commits():
        IdempotencyKey.objects.create(
            team=acting_as(alice).team, user=alice, key=key, fingerprint="f", status_code=201,
            content_type="application/json", body=b'{"first": true}', created_at=timezone.now(),
        )  # fmt: skip

    def book_while_the_first_commits():
        calls.append(1)
        allocation = allocation_book(acting=acting_as(alice), quote=quote)
        with ThreadPoolExecutor(1) as pool:
            pool.submit(first_answer_commits).result()
        return JsonResponse({"id": str(allocation.pk)}, status=201)

    answer = respond_once(
        acting=acting_as(alice), key=key, fingerprint="f", respond=book_while_the_first_commits
    )
    assert answer["Idempotent-Replayed"] == "true" and answer.content == b'{"first": true}'
    assert calls == [1] and Allocation.objects.count() == 0
    assert IdempotencyKey.objects.count() == 1


def test_a_failure_after_the_insert_stores_nothing_and_a_retry_succeeds(catalog, alice):
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1
    )
    key = str(uuid.uuid4())

    def crash_after_booking():
        allocation_book(acting=acting_as(alice), quote=quote)
        raise RuntimeError("power cut")

    with pytest.raises(RuntimeError):
        respond_once(acting=acting_as(alice), key=key, fingerprint="f", respond=crash_after_booking)
    assert Allocation.objects.count() == 0 and IdempotencyKey.objects.count() == 0
    assert LedgerEntry.objects.count() == 0

    def book():
        return JsonResponse(
            {"id": str(allocation_book(acting=acting_as(alice), quote=quote).pk)}, status=201
        )

    assert (
        respond_once(acting=acting_as(alice), key=key, fingerprint="f", respond=book).status_code
        == 201
    )
    assert Allocation.objects.count() == 1
    assert connection.in_atomic_block is False


def test_a_booking_waits_for_a_node_another_transaction_holds(catalog, alice):
    """Every node with room is locked elsewhere: placement skips nothing it could take, so it
    waits for a node (fullest first) instead of answering "no capacity", and books it once
    the lock goes."""
    acting = acting_as(alice)
    quote = quote_create(acting=acting, gpu_model="l4", gpu_count=1, period="day", period_count=1)
    nodes = list(
        Node.objects.filter(gpu_model__slug="l4", state=NodeState.ACTIVE).values_list(
            "pk", flat=True
        )
    )
    held, release = threading.Event(), threading.Event()

    @in_thread
    def hold():
        with transaction.atomic():
            list(Node.objects.select_for_update().filter(pk__in=nodes))
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    allocation = allocation_book(acting=acting, quote=quote)
    waited = time.monotonic() - started
    holder.join(10)
    assert allocation.node_id in nodes and waited >= 0.4
    assert overlapping_pairs() == 0
