"""The catalog list's read model: served from Redis while current, never staler than a
fresh answer. Each change that alters it is proved to: a booking, a cancellation, a
holding's end, a price change (now and scheduled), a node leaving service."""

from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import NodeState
from catalog.services import gpu_price_set
from rentals.models import AllocationGpu
from rentals.services import allocation_cancel
from tests.support.booking import book

pytestmark = pytest.mark.django_db(transaction=True)  # versions bump on commit
URL = "/api/v1/gpu-models/"


def _l4(api):
    with CaptureQueriesContext(connection) as queries:
        response = api.get(URL)
    row = next(m for m in response.json()["results"] if m["slug"] == "l4")
    day = next(p for p in row["prices"] if p["period"] == "day")
    return {"free": row["free_gpus_now"], "day": day["unit_price"],
            "queries": len(queries.captured_queries), "etag": response["ETag"]}  # fmt: skip


def test_a_repeat_is_served_from_the_cache_and_an_etag_answers_304(catalog, api):
    first, second = _l4(api), _l4(api)
    assert first["queries"] > 0 and second["queries"] == 0
    assert first["etag"] == second["etag"]
    assert api.get(URL, HTTP_IF_NONE_MATCH=first["etag"]).status_code == 304
    assert api.get(URL, HTTP_IF_NONE_MATCH='"other"').status_code == 200


def test_a_booking_shows_at_once(catalog, alice, api):
    assert _l4(api)["free"] == 4
    book(alice, model="l4", count=3, period="day")
    assert _l4(api)["free"] == 1


def test_a_cancellation_rebuilds_the_answer(catalog, alice, api):
    later = book(alice, model="l4", count=4, period="day",
                 starts_at=timezone.now() + timedelta(hours=2))  # fmt: skip
    _l4(api)
    assert _l4(api)["queries"] == 0
    allocation_cancel(acting=acting_as(alice), allocation=later)
    assert _l4(api)["queries"] > 0
    assert not AllocationGpu.objects.filter(released=False).exists()


def test_a_holding_that_ends_frees_its_gpus_in_the_answer(catalog, alice, api):
    book(alice, model="l4", count=4, period="day")
    AllocationGpu.objects.update(ends_at=timezone.now() + timedelta(seconds=1.5))
    assert _l4(api)["free"] == 0
    assert _l4(api)["queries"] == 0
    with time_machine.travel(timedelta(seconds=1.6)):
        assert _l4(api)["free"] == 4


def test_price_changes_show_now_and_when_scheduled(catalog, api):
    assert _l4(api)["day"] == "13.20"
    gpu_price_set(gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("12.00"))
    assert _l4(api)["day"] == "12.00"
    gpu_price_set(
        gpu_model=catalog.l4, period=catalog.day, unit_price=Decimal("11.00"),
        effective_from=timezone.now() + timedelta(seconds=1.5),
    )  # fmt: skip
    assert _l4(api)["day"] == "12.00"
    with time_machine.travel(timedelta(seconds=1.6)):
        assert _l4(api)["day"] == "11.00"


def test_a_node_leaving_service_shows_at_once(catalog, api):
    assert _l4(api)["free"] == 4
    node = next(n for n in catalog.nodes if n.gpu_model_id == catalog.l4.pk)
    node.state = NodeState.MAINTENANCE
    node.save(update_fields=["state"])
    assert _l4(api)["free"] == 0
