"""The capacity read model: after a refresh it equals the exact reads, a stale or missing
one is never served (the exact read answers, with no "as of"), pages say "as of" only when
they read it, booking stays exact, and a change's commit refreshes it."""

import contextlib
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.models import GpuModel, Node, NodeState
from rentals.errors import NoCapacity
from rentals.models import (
    AllocationGpu,
    BookedAheadDay,
    CapacityDay,
    CapacityNode,
    CapacitySummary,
)
from rentals.selectors.availability import (
    availability_calendar,
    availability_days,
    availability_days_read,
)
from rentals.selectors.summary import SUMMARY_DAYS, capacity_days_summary
from rentals.services import allocation_cancel, quote_create
from rentals.services.summary import capacity_summary_refresh
from rentals.sql import summary as summary_sql
from tests.support.booking import book
from tests.support.factories.catalog import NodeFactory, RegionFactory
from tests.support.waiting import wait_for

DAY = timedelta(days=1)
US = 1_000_000


@pytest.fixture
def frankfurt(catalog):
    """A second region: H100 nodes of two sizes (one network group) and an L4 node."""
    region = RegionFactory(slug="de-fra", name_en="Frankfurt")
    for gpus in (8, 8, 4):
        NodeFactory(
            gpu_model=catalog.h100, region=region, gpus=gpus, network_group="fra-1",
            fabric="RoCE 200 Gb/s",
        )  # fmt: skip
    NodeFactory(gpu_model=catalog.l4, region=region, gpus=4)
    return region


def _refresh_all():
    for pk in GpuModel.objects.values_list("pk", flat=True):
        assert isinstance(capacity_summary_refresh(gpu_model_id=pk), float)


def _nodes_exact(model, now):
    """Per active node of `model`: (GPUs, free now, fewest free over 30 days), in Python."""
    out = {}
    horizon = now + timedelta(days=30)
    for node in Node.objects.filter(gpu_model=model, state=NodeState.ACTIVE, gpu_count__gt=0):
        live = list(
            AllocationGpu.objects.filter(
                node_id=node.pk, released=False, ends_at__gt=now, starts_at__lt=horizon
            ).values_list("starts_at", "ends_at")
        )
        instants = [now] + [s for s, _e in live if s > now]
        most = max((sum(1 for s, e in live if s <= t < e) for t in instants), default=0)
        held_now = sum(1 for s, e in live if s <= now < e)
        out[node.pk] = (node.gpu_count, node.gpu_count - held_now, node.gpu_count - most)
    return out


def _booked_exact(model, first):
    """GPU-µs allocations hold per day from `first` on the model's nodes, in Python."""
    out = defaultdict(int)
    holdings = AllocationGpu.objects.filter(
        node__gpu_model=model, released=False, allocation__isnull=False
    ).values_list("starts_at", "ends_at")
    for k in range(SUMMARY_DAYS):
        start, end = first + k * DAY, first + (k + 1) * DAY
        for s, e in holdings:
            overlap = min(e, end) - max(s, start)
            if overlap > timedelta(0):
                out[k] += overlap // timedelta(microseconds=1)
    return out


@pytest.mark.django_db
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    bookings=st.lists(
        st.tuples(
            st.sampled_from(["h100", "l4"]), st.integers(0, 40), st.integers(0, 23),
            st.integers(1, 8), st.sampled_from(["day", "week", "month"]), st.booleans(),
        ),
        max_size=10,
    )
)  # fmt: skip
def test_after_a_refresh_the_summary_equals_the_exact_reads(catalog, frankfurt, alice, bookings):
    with transaction.atomic():  # each example from the same fleet
        _summary_equals_the_exact_reads(catalog, frankfurt, alice, bookings)
        transaction.set_rollback(True)


def _summary_equals_the_exact_reads(catalog, frankfurt, alice, bookings):
    now0 = connection.cursor().connection.execute("SELECT now()").fetchone()[0]
    base = now0.replace(minute=0, second=0, microsecond=0)
    for model, days, hours, count, period, cancel in bookings:
        with contextlib.suppress(NoCapacity):
            starts = base + days * DAY + timedelta(hours=hours + 1)
            allocation = book(alice, model=model, count=min(count, 4 if model == "l4" else 8),
                              period=period, starts_at=starts)  # fmt: skip
            if cancel:
                allocation_cancel(acting=acting_as(alice), allocation=allocation)
    _refresh_all()
    for slug in ("h100", "l4", "mi300x"):
        model = GpuModel.objects.get(slug=slug)
        as_of = CapacitySummary.objects.get(gpu_model=model).as_of
        for region_id in (None, catalog.nodes[0].region_id, frankfurt.pk):
            summary = capacity_days_summary(
                gpu_model=model, start=as_of, days=91, region_id=region_id, now=as_of
            )
            assert summary is not None
            rows, seen = summary
            assert seen == as_of
            exact = availability_days(gpu_model=model, start=as_of, days=91, region_id=region_id)
            assert [{**r, "free_gpus": int(r["free_gpus"])} for r in exact] == rows
        nodes = {
            row.node_id: (row.gpus, row.free_now, row.min_free_30d)
            for row in CapacityNode.objects.filter(gpu_model=model)
        }
        assert nodes == _nodes_exact(model, as_of)
        first = as_of.replace(hour=0, minute=0, second=0, microsecond=0)
        booked = _booked_exact(model, first)
        ahead = {
            (row.day - first.date()).days: row.gpu_us
            for row in BookedAheadDay.objects.filter(gpu_model=model)
        }
        assert set(ahead) == set(range(SUMMARY_DAYS))
        assert all(abs(ahead[k] - booked[k]) <= 1 for k in ahead), (ahead, booked)


@pytest.mark.django_db
def test_a_stale_or_missing_summary_falls_back_to_the_exact_read(catalog, alice):
    h100 = GpuModel.objects.get(slug="h100")
    book(alice, model="h100", count=3, period="week")
    now = connection.cursor().connection.execute("SELECT now()").fetchone()[0]
    rows, as_of = availability_days_read(gpu_model=h100, start=now, days=14)
    assert as_of is None  # no worker has written it yet
    assert rows == availability_days(gpu_model=h100, start=now, days=14)
    capacity_summary_refresh(gpu_model_id=h100.pk)
    written = CapacitySummary.objects.get(gpu_model=h100).as_of
    assert availability_days_read(gpu_model=h100, start=written, days=14)[1] == written
    # Three minutes without a worker: the rows are not served, whatever they say.
    CapacitySummary.objects.filter(gpu_model=h100).update(as_of=written - timedelta(minutes=3))
    CapacityDay.objects.filter(gpu_model=h100).update(free_gpus=999)
    rows, as_of = availability_days_read(gpu_model=h100, start=written, days=14)
    assert as_of is None
    assert rows == availability_days(gpu_model=h100, start=written, days=14)
    assert all(row["free_gpus"] != 999 for row in rows)


@pytest.mark.django_db
def test_a_software_requirement_reads_exactly(catalog, alice):
    from catalog.software import Requires

    h100 = GpuModel.objects.get(slug="h100")
    capacity_summary_refresh(gpu_model_id=h100.pk)
    as_of = CapacitySummary.objects.get(gpu_model=h100).as_of
    calendar = availability_calendar(
        gpu_model=h100, start=as_of, per_node=8, whole_nodes=False,
        requires=Requires(cuda="12.0"),
    )  # fmt: skip
    assert calendar.as_of is None
    calendar = availability_calendar(gpu_model=h100, start=as_of, per_node=8, whole_nodes=False)
    assert calendar.as_of == as_of


@pytest.mark.django_db
def test_the_book_page_says_as_of_only_when_it_read_the_summary(catalog, alice, client):
    client.force_login(alice)
    page = client.get("/book/h100/").content.decode()
    assert 'id="calendar-as-of"' not in page  # no summary yet: the exact read, no "as of"
    capacity_summary_refresh(gpu_model_id=GpuModel.objects.get(slug="h100").pk)
    page = client.get("/book/h100/").content.decode()
    assert 'id="calendar-as-of"' in page
    assert "the booking checks again" in page
    CapacitySummary.objects.update(as_of=CapacitySummary.objects.get().as_of - timedelta(hours=1))
    assert 'id="calendar-as-of"' not in client.get("/book/h100/").content.decode()


@pytest.mark.django_db
def test_a_booking_the_summary_promised_but_the_database_refuses_is_a_clear_409(
    catalog, alice, bob, alice_api
):
    """The summary says the L4 node is free (as of its refresh); meanwhile bob took it. The
    booking checks the holdings, not the summary: a 409 naming the earliest start."""
    l4 = GpuModel.objects.get(slug="l4")
    capacity_summary_refresh(gpu_model_id=l4.pk)
    quote = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=4, period="day", period_count=1
    )
    book(bob, model="l4", count=4, period="day")  # no refresh ran: no worker here
    shown = alice_api.get("/api/v1/availability/?gpu_model=l4&gpu_count=4").json()
    assert shown["as_of"] is not None and shown["days"][0]["max_gpus_on_one_node"] == 4
    answer = alice_api.post(
        "/api/v1/bookings/", {"quote": str(quote.pk)}, format="json",
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )  # fmt: skip
    assert answer.status_code == 409, answer.content
    body = answer.json()
    assert body["earliest_start"] is not None and body["detail"]
    assert AllocationGpu.objects.filter(allocation__user=alice).count() == 0


@pytest.mark.django_db
def test_a_refresh_is_single_flight(catalog):
    h100 = GpuModel.objects.get(slug="h100")
    from django.db import connections

    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(summary_sql.LOCK, {"model": h100.pk})
            assert capacity_summary_refresh(gpu_model_id=h100.pk) == "busy"
            cursor.execute("ROLLBACK")
        assert isinstance(capacity_summary_refresh(gpu_model_id=h100.pk), float)
        assert capacity_summary_refresh(gpu_model_id=h100.pk, force=False) == "current"
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_a_booking_refreshes_the_summary_once_it_commits(catalog, alice, worker):
    l4 = GpuModel.objects.get(slug="l4")
    capacity_summary_refresh(gpu_model_id=l4.pk)
    before = CapacitySummary.objects.get(gpu_model=l4).as_of
    assert CapacityNode.objects.get(gpu_model=l4).free_now == 4
    book(alice, model="l4", count=3, period="day")
    assert wait_for(lambda: CapacityNode.objects.get(gpu_model=l4).free_now == 1, timeout=10)
    assert CapacitySummary.objects.get(gpu_model=l4).as_of > before
