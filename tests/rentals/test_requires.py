"""Bookings that require a minimum driver, CUDA or ROCm version: the quote records it, and
the calendar, the start windows and placement honour it as they honour a region; versions
compared as versions (12.10 > 12.9). A node whose stack is unknown meets no minimum."""

import contextlib
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import GpuModel
from catalog.services import node_software_record
from catalog.software import Requires
from core.db import db_now
from core.errors import Invalid
from rentals.errors import NoCapacity
from rentals.models import Allocation
from rentals.selectors.availability import availability_days, fits, start_windows
from rentals.services import allocation_book, quote_create
from tests.support.booking import book
from tests.support.factories.accounts import UserFactory
from tests.support.factories.catalog import NodeFactory
from tests.support.races import overlapping_pairs, race_to_book

DAY = timedelta(days=1)
STACKS = {  # H100 nodes of catalog_setup: 8 GPUs, 8 GPUs, 4 GPUs
    0: {"vendor": "nvidia", "driver": "580.65.06", "cuda": "13.0"},
    1: {"vendor": "nvidia", "driver": "550.127.05", "cuda": "12.4"},
    2: {"vendor": "nvidia", "driver": "575.57.08", "cuda": "12.9"},
}


def _stacks(catalog, stacks=STACKS):
    for index, report in stacks.items():
        node_software_record(node_id=catalog.nodes[index].pk, report=report, at=timezone.now())


def _quote(user, **request):
    return quote_create(
        acting=acting_as(user), gpu_model="h100", period="day", period_count=1, **request
    )


@pytest.mark.django_db
def test_a_quote_records_its_minimums_and_books_only_on_a_node_that_meets_them(catalog, alice):
    _stacks(catalog)
    quote = _quote(alice, gpu_count=4, requires_cuda="12.9", requires_driver="575")
    assert (quote.requires_cuda, quote.requires_driver, quote.requires_rocm) == ("12.9", "575", "")
    allocation = allocation_book(acting=acting_as(alice), quote=quote)
    assert allocation.node.cuda_version in ("13.0", "12.9")
    # 12.10 is above 12.9 (and 13.0 above both): only the 13.0 node is left
    placed = allocation_book(
        acting=acting_as(alice), quote=_quote(alice, gpu_count=8, requires_cuda="12.10")
    )
    assert placed.node == catalog.nodes[0]


@pytest.mark.django_db
def test_no_node_meets_it_a_clear_refusal_naming_the_minimum(catalog, alice):
    _stacks(catalog)
    with pytest.raises(NoCapacity) as refused:
        _quote(alice, gpu_count=1, requires_cuda="13.1")
    assert "CUDA ≥ 13.1" in refused.value.detail and refused.value.earliest_start is None
    with pytest.raises(NoCapacity):  # an unknown stack (the L4 node) meets no minimum
        quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day",
                     period_count=1, requires_driver="1")  # fmt: skip
    assert not Allocation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["12.x", "v12.8", "cu128", "12..1"])
def test_a_malformed_version_is_a_field_error_and_nothing_is_stored(catalog, alice, bad):
    with pytest.raises(Invalid) as refused:
        _quote(alice, gpu_count=1, requires_cuda=bad)
    assert list(refused.value.errors) == ["requires_cuda"]
    assert bad in refused.value.errors["requires_cuda"][0]  # named, in either language


@pytest.mark.django_db
def test_the_calendar_with_a_constraint_never_shows_a_day_placement_would_refuse(catalog, alice):
    _stacks(catalog)
    h100 = GpuModel.objects.get(slug="h100")
    now = db_now()
    for starts_in, count in ((0, 8), (1, 4), (2, 8), (2, 4), (3, 2)):
        with contextlib.suppress(NoCapacity):
            book(alice, model="h100", count=count, period="day",
                 starts_at=now + starts_in * DAY + timedelta(hours=1))  # fmt: skip
    for minimum in (Requires(cuda="12.9"), Requires(cuda="12.10"), Requires(driver="550.54.15")):
        days = availability_days(gpu_model=h100, start=now, days=6, requires=minimum)
        plain = availability_days(gpu_model=h100, start=now, days=6)
        for day, anywhere in zip(days[1:], plain[1:], strict=True):
            start = now.replace(hour=0, minute=0, second=0, microsecond=0)
            start += (day["date"] - start.date()).days * DAY
            most = day["max_gpus_on_one_node"]
            assert most <= anywhere["max_gpus_on_one_node"]
            if most:
                assert fits(gpu_model=h100, gpu_count=most, starts_at=start, ends_at=start + DAY,
                            requires=minimum)  # fmt: skip
            assert not fits(gpu_model=h100, gpu_count=most + 1, starts_at=start,
                            ends_at=start + DAY, requires=minimum)  # fmt: skip
    # and the first start window is where a booking with the constraint then lands
    (first, *_rest) = start_windows(
        gpu_model=h100, duration=DAY, not_before=now, gpu_count=8, requires=Requires(cuda="13.0")
    )
    quote = _quote(alice, gpu_count=8, starts_at=first["starts_at"], requires_cuda="13.0")
    allocation = allocation_book(acting=acting_as(alice), quote=quote)
    assert allocation.node.hostname in first["nodes"] and allocation.node == catalog.nodes[0]


@pytest.mark.django_db
def test_the_api_takes_requires_on_the_quote_and_the_calendar(catalog, alice_api):
    _stacks(catalog)
    body = {"gpu_model": "h100", "gpu_count": 8, "period": "day", "period_count": 1,
            "requires_cuda": "12.10"}  # fmt: skip
    answer = alice_api.post("/api/v1/quotes/", body, format="json")
    assert answer.status_code == 201 and answer.json()["requires_cuda"] == "12.10"
    calendar = alice_api.get(
        "/api/v1/availability/?gpu_model=h100&gpu_count=8&requires_cuda=13.1"
    ).json()
    assert calendar["earliest_start"] is None and calendar["days"][1]["free_gpus"] == 0
    calendar = alice_api.get(
        "/api/v1/availability/?gpu_model=h100&gpu_count=1&requires_cuda=12.9"
    ).json()
    assert calendar["days"][1]["free_gpus"] == 12  # the 13.0 and the 12.9 node
    bad = alice_api.post("/api/v1/quotes/", {**body, "requires_driver": "latest"}, format="json")
    assert bad.status_code == 400
    assert "requires_driver" in str(bad.json())
    bad = alice_api.get("/api/v1/availability/?gpu_model=h100&requires_rocm=6.x")
    assert bad.status_code == 400 and "requires_rocm" in str(bad.json())


@pytest.mark.django_db(transaction=True)
def test_24_concurrent_bookings_with_a_minimum_never_land_on_a_node_that_fails_it(catalog):
    """Eight 4-GPU H100 nodes more, half of them on a CUDA 12.4 driver: 24 bookings of 2
    GPUs that require CUDA 12.8 race for the 28 GPUs whose nodes meet it (the 13.0 and 12.9
    nodes and four of the new ones), alongside plain bookings for whatever is left."""
    _stacks(catalog)
    for i in range(8):
        node = NodeFactory(gpu_model=catalog.h100, region=catalog.nodes[0].region, gpus=4)
        report = {"vendor": "nvidia", "driver": "570.124.06" if i % 2 else "550.54.15",
                  "cuda": "12.8" if i % 2 else "12.4"}  # fmt: skip
        node_software_record(node_id=node.pk, report=report, at=timezone.now())
    users = UserFactory.create_batch(24)
    quotes = [
        _quote(u, gpu_count=2, requires_cuda="12.8") if i < 20 else _quote(u, gpu_count=2)
        for i, u in enumerate(users)
    ]
    results = race_to_book(users, quotes)

    constrained = Allocation.objects.filter(quote__requires_cuda="12.8").select_related("node")
    assert constrained.count() == results[:20].count("ok")
    assert all(a.node.cuda_key >= [12, 8] for a in constrained)
    # the plain ones all fit (52 GPUs in all); the nodes that meet CUDA 12.8 (the 13.0 node,
    # the 12.9 node and four 12.8 nodes: 28 GPUs) end up full, a refusal only once they are
    assert results[20:] == ["ok"] * 4
    meeting = Allocation.objects.filter(node__cuda_key__gte=[12, 8])
    assert sum(a.gpu_count for a in meeting) == 28
    assert results[:20].count("ok") == 14 - meeting.filter(quote__requires_cuda="").count()
    assert overlapping_pairs() == 0
