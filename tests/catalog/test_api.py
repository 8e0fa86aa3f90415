from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import Node, NodeState
from catalog.services import gpu_price_set
from rentals.selectors.availability import gpu_model_offers
from tests.support.booking import book
from tests.support.factories.catalog import GpuModelFactory, NodeFactory, price

pytestmark = pytest.mark.django_db


def test_gpu_models_with_prices_and_free_gpus(catalog, api, alice):
    book(alice, count=2)
    body = api.get("/api/v1/gpu-models/?ordering=name").json()
    h100 = next(m for m in body["results"] if m["slug"] == "h100")
    assert h100["free_gpus_now"] == 18
    free = {m.slug: m.free_gpus_now for m in gpu_model_offers()}
    assert free == {"h100": 18, "l4": 4, "mi300x": 8}
    # A node out of service offers nothing, and what it holds is not taken off the others.
    on_l4 = book(alice, model="l4", count=1, period="day")
    Node.objects.filter(pk=on_l4.node_id).update(state=NodeState.MAINTENANCE)
    later = book(alice, count=3, period="day", starts_at=timezone.now() + timedelta(days=3))
    assert later.paid_from > timezone.now()  # booked ahead: not held now
    assert {m.slug: m.free_gpus_now for m in gpu_model_offers()} == {**free, "l4": 0}
    assert h100["prices"] == [
        {
            "period": "day",
            "unit_price": "57.60",
            "currency": "USD",
            "effective_from": h100["prices"][0]["effective_from"],
        },
        {
            "period": "week",
            "unit_price": "362.88",
            "currency": "USD",
            "effective_from": h100["prices"][1]["effective_from"],
        },
        {
            "period": "month",
            "unit_price": "1296.00",
            "currency": "USD",
            "effective_from": h100["prices"][2]["effective_from"],
        },
    ]


def test_price_list_shows_the_row_in_force(catalog, api):
    gpu_price_set(gpu_model=catalog.l4, period=catalog.week, unit_price=Decimal("80.00"))
    body = api.get("/api/v1/gpu-models/?vendor=nvidia&min_memory_gb=20&max_memory_gb=30").json()
    l4 = next(m for m in body["results"] if m["slug"] == "l4")
    assert [p["unit_price"] for p in l4["prices"] if p["period"] == "week"] == ["80.00"]


@pytest.mark.parametrize(
    ("query", "slugs"),
    [
        ("vendor=amd", ["mi300x"]),
        ("stack=cuda&ordering=name", ["h100", "l4"]),
        ("min_memory_gb=100", ["mi300x"]),
        ("max_price=100&price_period=week", ["l4"]),
        ("fp8=true&ordering=-memory_gb", ["mi300x", "h100", "l4"]),
    ],
)
def test_filters(catalog, api, query, slugs):
    assert [m["slug"] for m in api.get(f"/api/v1/gpu-models/?{query}").json()["results"]] == slugs


def test_bad_filter_is_a_problem_detail(catalog, api):
    response = api.get("/api/v1/gpu-models/?min_memory_gb=lots&vendor=intel")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"min_memory_gb", "vendor"}


def test_model_list_query_count_is_constant(catalog, api):
    def count():
        cache.clear()  # a fresh answer, not the read model's copy (tests/rentals/test_catalog_cache.py)
        with CaptureQueriesContext(connection) as ctx:
            assert api.get("/api/v1/gpu-models/").status_code == 200
        return len(ctx.captured_queries)

    before = count()
    for i in range(5):
        model = GpuModelFactory(slug=f"extra-{i}")
        price(model, catalog.week, "100.00")
        price(model, catalog.day, "20.00")
        NodeFactory(gpu_model=model, gpus=4)
    # whether the capacity summaries serve, the next change in time, models, prices, the
    # summaries' GPUs free now and, with none kept here, the holdings', periods, stacks
    assert count() == before == 7


def test_periods_options_regions(catalog, api):
    assert api.get("/api/v1/periods/").json() == [
        {"slug": "day", "name": "day", "duration_seconds": 86400},
        {"slug": "week", "name": "week", "duration_seconds": 604800},
        {"slug": "month", "name": "month", "duration_seconds": 2592000},
    ]
    options = {o["slug"]: o for o in api.get("/api/v1/options/").json()}
    assert options["public-ipv4"]["gpu_models"] == ["h100"]
    assert api.get("/api/v1/regions/").json() == [{"slug": "pl-waw", "name": "Warsaw"}]


def test_nodes_are_for_staff(catalog, api, alice_api, staff_api):
    assert api.get("/api/v1/nodes/").status_code == 401
    assert alice_api.get("/api/v1/nodes/").status_code == 403
    body = staff_api.get("/api/v1/nodes/").json()
    assert body["count"] == 5 and body["results"][0]["gpu_total"] in (4, 8)


def test_glossary_api_in_both_languages(api, glossary):
    pl = api.get("/api/v1/glossary/?lang=pl").json()
    en = api.get("/api/v1/glossary/?lang=en").json()
    assert len(pl) == len(en) == 12
    assert pl[1] == {
        "slug": "kv-cache",
        "term": "Pamięć podręczna KV",
        "definition": pl[1]["definition"],
    }
    assert en[10]["slug"] == "fixed-rental-period" and "exactly 7 days" in en[10]["definition"]
    assert api.get("/api/v1/glossary/?lang=de").status_code == 400


@pytest.mark.parametrize(
    "query", ["limit=99999999999999999999", "offset=99999999999999999999", "limit=-1"]
)
def test_huge_or_negative_paging_is_not_a_server_error(catalog, api, query):
    response = api.get(f"/api/v1/gpu-models/?{query}")
    assert response.status_code == 200
    assert len(response.json()["results"]) <= 3
