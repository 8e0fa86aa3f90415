"""Placement bounded by the capacity read model: at most PLACEMENT_CANDIDATES nodes it names
are checked exactly, each under its lock; the full read of the model's nodes runs only when
none of them fits, when the summary is stale or missing, or for a software stack. Exact
under races: the exclusion constraint and the node lock stay the guarantee."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.roles import acting_as
from catalog.models import GpuModel
from catalog.services import node_software_record
from rentals.errors import NoCapacity
from rentals.models import Allocation, CapacityNode, CapacitySummary, LedgerEntry
from rentals.selectors.summary import PLACEMENT_CANDIDATES, capacity_nodes_fullest
from rentals.services import allocation_book, quote_create
from rentals.services.summary import capacity_summary_refresh
from rentals.sql import capacity as capacity_sql
from tests.support.booking import book
from tests.support.factories.accounts import UserFactory
from tests.support.factories.catalog import NodeFactory
from tests.support.races import overlapping_pairs, race_to_book, statements_run

DAY = timedelta(days=1)


def _refresh(slug: str = "h100") -> GpuModel:
    model = GpuModel.objects.get(slug=slug)
    assert isinstance(capacity_summary_refresh(gpu_model_id=model.pk), float)
    return model


def _paths(ran: list[str]) -> tuple[bool, bool]:
    """(the bounded statement ran, the full read ran)."""
    return capacity_sql.PLACE_AMONG in ran, capacity_sql.PLACE in ran


@pytest.mark.django_db(transaction=True)
def test_24_concurrent_bookings_through_the_bounded_path_sell_no_gpu_twice(catalog):
    """The H100 nodes (8, 8 and 4 GPUs) summarised a moment ago: 24 bookings of one GPU race
    for their 20 GPUs. Each asks the summary's candidates first; 20 book, 4 are told
    NoCapacity (any other error would leave the race), and no GPU is held twice."""
    _refresh("h100")
    users = UserFactory.create_batch(24)
    quotes = [
        quote_create(acting=acting_as(u), gpu_model="h100", gpu_count=1, period="day",
                     period_count=1)
        for u in users
    ]  # fmt: skip
    statements: list[list[str]] = []
    results = race_to_book(users, quotes, statements)

    assert results.count("ok") == 20 and results.count("no_capacity") == 4
    assert Allocation.objects.count() == 20 == LedgerEntry.objects.count()
    assert overlapping_pairs() == 0
    paths = [_paths(ran) for ran in statements]
    assert all(bounded for bounded, _full in paths)  # every booking asked the candidates first
    # some were placed by them alone (the first to ask always is: nothing held yet) ...
    assert any(r == "ok" and not full for r, (_b, full) in zip(results, paths, strict=True))
    # ... and a refusal comes only after the full read found no room either
    assert all(full for r, (_b, full) in zip(results, paths, strict=True) if r == "no_capacity")


@pytest.mark.django_db
def test_a_fresh_summary_places_among_its_candidates_fullest_first(catalog, alice):
    _refresh("h100")
    with statements_run() as ran:
        allocation = book(alice, model="h100", count=2, period="day")
    assert _paths(ran) == (True, False)
    assert allocation.node == catalog.nodes[2]  # the 4-GPU node: fullest first


@pytest.mark.django_db
def test_a_stale_or_missing_summary_places_by_the_full_read(catalog, alice):
    with statements_run() as ran:  # no worker has written it
        book(alice, model="h100", count=1, period="day")
    assert _paths(ran) == (False, True)
    model = _refresh("h100")
    stale = timezone.now() - timedelta(minutes=3)  # every row of a refresh has its as_of
    CapacitySummary.objects.filter(gpu_model=model).update(as_of=stale)
    CapacityNode.objects.filter(gpu_model=model).update(as_of=stale)
    with statements_run() as ran:
        book(alice, model="h100", count=1, period="day")
    assert _paths(ran) == (False, True)


@pytest.mark.django_db
def test_a_software_stack_places_by_the_full_read(catalog, alice):
    """The summary is not kept per software stack: a booking that requires one reads the
    holdings of the nodes that meet it."""
    report = {"vendor": "nvidia", "driver": "580.65.06", "cuda": "13.0"}
    node_software_record(node_id=catalog.nodes[0].pk, report=report, at=timezone.now())
    _refresh("h100")
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=1, period="day", period_count=1,
        requires_cuda="12.8",
    )  # fmt: skip
    with statements_run() as ran:
        allocation = allocation_book(acting=acting_as(alice), quote=quote)
    assert _paths(ran) == (False, True)
    assert allocation.node == catalog.nodes[0]


@pytest.mark.django_db
def test_when_no_candidate_fits_the_full_read_finds_the_node_the_summary_missed(
    catalog, alice, bob
):
    """Summarised with both 8-GPU nodes free; since then bob filled them and a new 8-GPU
    node came (no worker ran). The candidates do not fit; the full read places on the new
    node. With no room left anywhere, the answer is NoCapacity."""
    _refresh("h100")
    for _node in range(2):
        book(bob, model="h100", count=8, period="day")
    added = NodeFactory(gpu_model=catalog.h100, region=catalog.nodes[0].region, gpus=8)
    with statements_run() as ran:
        allocation = book(alice, model="h100", count=8, period="day")
    assert _paths(ran) == (True, True)
    assert allocation.node == added
    with pytest.raises(NoCapacity):
        book(alice, model="h100", count=8, period="day")
    assert Allocation.objects.filter(user=alice).count() == 1


@pytest.mark.django_db
def test_the_candidates_are_at_most_k_fullest_first(catalog, alice):
    region = catalog.nodes[0].region
    extra = [
        NodeFactory(gpu_model=catalog.l4, region=region, gpus=4)
        for _ in range(PLACEMENT_CANDIDATES + 8)
    ]
    book(alice, model="l4", count=3, period="day")  # one node left with a single GPU free
    model = _refresh("l4")
    now = timezone.now()
    window = {"starts_at": now, "ends_at": now + DAY}
    one = capacity_nodes_fullest(gpu_model=model, gpu_count=1, **window)
    assert one is not None and len(one) == PLACEMENT_CANDIDATES
    fullest = Allocation.objects.get(user=alice).node_id
    assert one[0] == fullest  # 1 free: fullest first, then by id
    everyone = sorted([catalog.nodes[3].pk] + [n.pk for n in extra])
    assert one[1:] == [pk for pk in everyone if pk != fullest][: PLACEMENT_CANDIDATES - 1]
    four = capacity_nodes_fullest(gpu_model=model, gpu_count=4, **window)
    assert four is not None and fullest not in four and len(four) == PLACEMENT_CANDIDATES


@pytest.mark.django_db
def test_a_later_window_asks_the_fewest_free_over_the_horizon(catalog, alice):
    """A booking in ten days fills the first 8-GPU node then: a window from now may take it
    (it is free now), one starting in two days for a week is not guessed there. Past the
    summary's 30 days it guesses nothing."""
    now = timezone.now()
    book(alice, model="h100", count=8, period="day", starts_at=now + 10 * DAY)
    held = Allocation.objects.get(user=alice).node_id
    model = _refresh("h100")
    soon = capacity_nodes_fullest(gpu_model=model, gpu_count=8, starts_at=now, ends_at=now + DAY)
    later = capacity_nodes_fullest(
        gpu_model=model, gpu_count=8, starts_at=now + 2 * DAY, ends_at=now + 9 * DAY
    )
    assert soon is not None and held in soon and len(soon) == 2
    assert later is not None and held not in later and len(later) == 1
    beyond = capacity_nodes_fullest(
        gpu_model=model, gpu_count=8, starts_at=now + 20 * DAY, ends_at=now + 40 * DAY
    )
    assert beyond == []
