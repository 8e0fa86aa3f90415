"""Redis is a cache and a broker, not a dependency of correctness: without it the catalog,
quotes, bookings and pages are served from PostgreSQL, sign-in fails closed in words (503),
a hung Redis costs one request one timeout and no more, mail and deliveries that could not
be queued are left for the sweeps, and a version bump lost meanwhile is made good when
Redis answers again."""

import socket
import time
import uuid
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from kombu import pools

from anchorgpu.celery import app
from core.cache import breaker
from rentals.models import LedgerEntry, Notice
from rentals.services import notices_unsent
from tests.support.booking import book

pytestmark = pytest.mark.django_db
QUOTE = {"gpu_model": "l4", "gpu_count": 1, "period": "day", "period_count": 1}


@pytest.fixture(autouse=True)
def _breaker_closed():
    breaker.open_until, breaker.failed = 0.0, False
    yield
    breaker.open_until, breaker.failed = 0.0, False


def _cache_at(settings, location):
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "LOCATION": location},
    }


@pytest.fixture
def redis_gone(settings):
    """Nothing listens where Redis was: every connection is refused at once."""
    _cache_at(settings, "redis://127.0.0.1:1/0")
    broker = app.conf.broker_url
    _broker_at("redis://127.0.0.1:1/0")
    yield
    _broker_at(broker)


def _broker_at(url):
    """Celery's producers on another broker: its pools are dropped, to be made afresh (kombu
    keeps connection and producer pools in registries keyed by broker; a closed pool left
    there would answer every later publish in this process with "Acquire on closed pool")."""
    app.conf.broker_url = url
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def redis_hung(settings):
    """A Redis that takes connections and never answers, as one stopped with SIGSTOP."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)  # never accepted: the kernel completes the handshake, nobody reads
    _cache_at(settings, f"redis://127.0.0.1:{listener.getsockname()[1]}/0")
    yield
    listener.close()


def test_the_catalog_quotes_bookings_and_pages_work_without_redis(
    catalog, alice, alice_api, client, redis_gone
):
    started = time.monotonic()
    models = alice_api.get("/api/v1/gpu-models/")
    assert models.status_code == 200
    assert {m["slug"]: m["free_gpus_now"] for m in models.json()["results"]}["l4"] == 4
    quote = alice_api.post("/api/v1/quotes/", QUOTE, format="json")
    assert quote.status_code == 201
    booked = alice_api.post(
        "/api/v1/bookings/", {"quote": quote.json()["id"]}, format="json",
        HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()),
    )  # fmt: skip
    assert booked.status_code == 201
    assert LedgerEntry.objects.filter(allocation_id=booked.json()["id"]).count() == 1
    client.force_login(alice)
    for page in ("/", "/allocations/", f"/allocations/{booked.json()['id']}/", "/statement/"):
        assert client.get(page).status_code == 200, page
    assert time.monotonic() - started < 5  # refused connections cost nothing


def test_sign_in_fails_closed_with_a_503_in_words(alice, api, client, redis_gone):
    refused = api.post(
        "/api/v1/auth/token/", {"username": "alice", "password": "pw-alice-123456"}, format="json"
    )
    assert refused.status_code == 503 and refused["Content-Type"] == "application/problem+json"
    assert refused.json()["code"] == "cache_unavailable" and refused["Retry-After"] == "10"
    page = client.post("/account/login/", {"login": "alice", "password": "pw-alice-123456"})
    assert (
        page.status_code == 503
        and "Sign-in checks are briefly unavailable" in page.content.decode()
    )
    assert "_auth_user_id" not in client.session


def test_a_hung_redis_costs_one_timeout_then_nothing(catalog, api, redis_hung):
    started = time.monotonic()
    assert api.get("/api/v1/gpu-models/").status_code == 200
    first = time.monotonic() - started
    assert first < 2.0  # one read timeout (1 s), the answer from PostgreSQL
    # The breaker is open (BREAKER_SECONDS): Redis is not tried, so no request waits out a
    # read timeout (1 s). Timed one by one, not as a batch: a loaded machine stretches the
    # batch, not the absence of a timeout.
    for _ in range(5):
        started = time.monotonic()
        assert api.get("/api/v1/gpu-models/").status_code == 200
        assert time.monotonic() - started < 1.0
    assert not breaker.allows()


def test_mail_that_could_not_be_queued_is_left_for_the_sweep(catalog, alice, redis_gone):
    allocation = book(alice, model="l4", count=1, period="day")
    receipt = Notice.objects.get(allocation=allocation)
    assert receipt.sent_at is None
    assert receipt.pk in notices_unsent(older_than=timedelta(0))


def test_a_bump_lost_while_redis_was_away_is_made_good_when_it_is_back(catalog, alice, api):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            api.get("/api/v1/gpu-models/")
        return len(captured.captured_queries)

    queries()
    assert queries() == 0  # served from the read model
    breaker.failure(ConnectionError("Redis went away"))  # meanwhile a booking's bump is lost
    breaker.open_until = 0.0
    cache.get("anything")  # the first answer from Redis again
    assert queries() > 0  # nothing built before is served
