"""Statements per quote, booking and catalog list, pinned: a change that adds one shows
here (savepoint commands count too)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from rentals.models import Allocation
from rentals.services import allocation_book, quote_create
from tests.support.booking import key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _rates(pln_rates):
    """The booking's invoice is issued with the rate of a day before the sale (not held)."""


QUOTE = {"gpu_model": "h100", "gpu_count": 1, "period": "day", "period_count": 1}


def _count(call):
    with CaptureQueriesContext(connection) as queries:
        result = call()
    return len(queries.captured_queries), result


def test_a_quote_and_a_booking_through_the_services(catalog, alice):
    acting = acting_as(alice)
    quote_create(acting=acting, **QUOTE)  # warm: the session's first reads
    statements, quote = _count(lambda: quote_create(acting=acting, **QUOTE))
    assert statements == 7
    statements, _allocation = _count(lambda: allocation_book(acting=acting, quote=quote))
    # 9, the booker's SSH keys (none here: nothing to attach), the invoice, the invoiced
    # team's terms under its lock (an overdue invoice and its credit limit, one statement),
    # the capacity read model's candidate nodes for placement (none fresh here: the full
    # read follows), and its mark of the node whose holdings changed (the next refresh's)
    assert statements == 14


def test_a_quote_a_booking_and_the_catalog_over_http(catalog, alice_api, api):
    alice_api.post("/api/v1/quotes/", QUOTE, format="json")
    statements, quote = _count(lambda: alice_api.post("/api/v1/quotes/", QUOTE, format="json"))
    assert statements == 9
    statements, booking = _count(
        lambda: alice_api.post(
            "/api/v1/bookings/",
            {"quote": quote.json()["id"]},
            format="json",
            HTTP_IDEMPOTENCY_KEY=key(),
        )  # fmt: skip
    )
    # 15, the booker's SSH keys, the node's agent for `access`, the invoice, the invoiced
    # team's terms (an overdue invoice and its credit limit, one statement), placement's
    # candidate nodes, and the capacity read model's mark of the node for its next refresh
    assert statements == 21
    allocation = Allocation.objects.select_related("node__region").get()
    answered = booking.json()["allocation"]
    assert (answered["node"], answered["region"]) == (
        allocation.node.hostname, allocation.node.region.slug
    )  # fmt: skip
    statements, _page = _count(lambda: api.get("/api/v1/gpu-models/"))
    # a fresh answer: whether the capacity summaries serve, the next change in time, models,
    # prices, the summaries' GPUs free now and (none kept here) the holdings', periods, stacks
    assert statements == 7
    statements, _page = _count(lambda: api.get("/api/v1/gpu-models/"))
    assert statements == 0  # the read model


def test_a_quote_with_a_bearer_token(catalog, alice, api):
    """The token's row brings its user and team; the role is one more statement."""
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=alice, name='ci')}")
    api.post("/api/v1/quotes/", QUOTE, format="json")  # warm, and the token's last use noted
    statements, response = _count(lambda: api.post("/api/v1/quotes/", QUOTE, format="json"))
    assert response.status_code == 201
    assert statements == 9  # with BEGIN and COMMIT
