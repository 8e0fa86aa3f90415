"""Hostile strings into every page's query and form fields and every API field: never a
5xx, and a refused request changes nothing."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services.tokens import api_token_create
from rentals.models import Allocation, LedgerEntry, Quote
from telemetry.models import Flag
from tests.support.booking import book

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "\x00",
            "a\x00b",
            "²",
            "١٢",
            "\u202eevil",
            "\ufeff1",
            "9" * 400,
            "-1",
            "-9999999999",
            "1e309",
            "NaN",
            "Infinity",
            "0x10",
            " 1 ",
            "",
            "null",
            "true",
            "[]",
            "{}",
            "%00",
            "../../etc/passwd",
            "<script>alert(1)</script>",
            "' OR 1=1 --",
            "x" * 100_000,
            "[" * 5000 + "]" * 5000,
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2026-02-30T25:61:00",
            "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        ]
    ),  # fmt: skip
    st.text(max_size=50),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)
JSON_VALUES = st.one_of(
    HOSTILE,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None
)


def _state():
    """What a refusal must leave as it was. (A refused purchase does store its answer under
    its Idempotency-Key, by design, so that a retry is refused the same way.)"""
    return (
        Allocation.objects.count(), LedgerEntry.objects.count(), Quote.objects.count(),
        ApiToken.objects.filter(revoked_at__isnull=True).count(), Flag.objects.count(),
    )  # fmt: skip


@pytest.fixture
def world(catalog, alice, staff, client):
    allocation = book(alice, model="h100", count=1, period="day", periods=2)
    client.force_login(alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=alice, name='f')}")
    return {"client": client, "api": api, "allocation": allocation, "staff": staff}


PAGE_GETS = [
    ("/", ["vendor", "min_memory_gb", "stack", "fp8", "max_price", "price_period", "ordering"]),
    ("/glossary/", ["q"]),
    ("/allocations/", ["state"]),
    ("/book/h100/", ["gpu_count", "period", "period_count"]),
    ("/usage/", ["days", "csv"]),
]
PAGE_POSTS = [
    ("/book/h100/", ["gpu_count", "period", "period_count", "start", "starts_at", "option_nvme"]),
    ("/book/h100/estimate/", ["gpu_count", "shape", "period", "start", "starts_at", "region"]),
    ("/account/tokens/", ["name", "revoke"]),
    ("/account/login/", ["login", "password"]),
    ("/allocations/{pk}/extend/", ["period_count", "idempotency_key"]),
    ("/allocations/{pk}/stop/", ["x"]),
]
API_GETS = [
    ("/api/v1/gpu-models/", ["vendor", "min_memory_gb", "stack", "fp8", "max_price", "ordering",
                             "limit", "offset"]),
    ("/api/v1/allocations/", ["state", "limit", "offset"]),
    ("/api/v1/allocations/{pk}/telemetry/", ["from", "to"]),
    ("/api/v1/glossary/", ["lang", "q"]),
    ("/api/v1/ledger/", ["limit", "offset"]),
]  # fmt: skip
API_POSTS = [
    ("/api/v1/quotes/", {"gpu_model": "h100", "gpu_count": 1, "period": "day",
                         "period_count": 1, "starts_at": None, "options": [], "region": None}),
    ("/api/v1/bookings/", {"quote": "00000000-0000-0000-0000-000000000000"}),
    ("/api/v1/allocations/{pk}/extend/", {"period_count": 1}),
    ("/api/v1/auth/token/", {"username": "alice", "password": "x", "name": "n"}),
]  # fmt: skip


def _url(template, world):
    return template.replace("{pk}", str(world["allocation"].pk))


@pytest.mark.django_db
@FUZZ
@given(data=st.data())
def test_pages_answer_hostile_query_and_form_values_without_a_server_error(world, data):
    client = world["client"]
    url, fields = data.draw(st.sampled_from(PAGE_GETS + PAGE_POSTS))
    values = {
        f: data.draw(HOSTILE) for f in data.draw(st.sets(st.sampled_from(fields), min_size=1))
    }
    if url == "/usage/":
        client.force_login(world["staff"])
    before = _state()
    if (url, fields) in PAGE_GETS:
        response = client.get(_url(url, world), values)
    else:
        response = client.post(_url(url, world), values)
    assert response.status_code < 500, (url, values)
    if response.status_code >= 400:
        assert _state() == before
    client.force_login(world["allocation"].user)


@pytest.mark.django_db
@FUZZ
@given(data=st.data())
def test_api_fields_answer_hostile_values_without_a_server_error(world, data):
    api = world["api"]
    if data.draw(st.booleans()):
        url, fields = data.draw(st.sampled_from(API_GETS))
        values = {f: data.draw(HOSTILE) for f in data.draw(st.sets(st.sampled_from(fields)))}
        response = api.get(_url(url, world), values)
    else:
        url, body = data.draw(st.sampled_from(API_POSTS))
        field = data.draw(st.sampled_from(sorted(body)))
        body = {**body, field: data.draw(JSON_VALUES)}
        before = _state()
        response = api.generic(
            "POST", _url(url, world), json.dumps(body), content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=data.draw(st.one_of(st.uuids().map(str), HOSTILE)),
        )  # fmt: skip
        if response.status_code >= 400:
            assert _state() == before, (url, body, response.status_code, before, _state())
    assert response.status_code < 500, (url, response.content[:300])


@pytest.mark.django_db
def test_a_period_count_of_four_hundred_digits_on_the_booking_page_is_no_500(
    catalog, alice, client
):
    """Found by the fuzz above once: the calendar's start windows multiplied the period by
    it (OverflowError)."""
    client.force_login(alice)
    page = client.get("/book/h100/", {"gpu_count": "1", "period": "day", "period_count": "9" * 400})
    assert page.status_code in (200, 400)
