"""The capacity read model: after a refresh it equals the exact reads, a stale or missing
one is never served (the exact read answers, with no "as of"), pages say "as of" only when
they read it, booking stays exact, and a change's commit refreshes it."""

import contextlib
import itertools
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.models import GpuModel, Node, NodeState
from core.db import db_now
from core.errors import DomainError
from rentals.errors import ChoiceMissing, NoCapacity
from rentals.models import (
    Allocation,
    AllocationGpu,
    BookedAheadDay,
    CapacityBucket,
    CapacityDay,
    CapacityNode,
    CapacityNodeDays,
    CapacitySummary,
)
from rentals.selectors.availability import (
    availability_calendar,
    availability_days,
    availability_days_read,
    gpu_model_offers,
    start_windows,
)
from rentals.selectors.summary import SUMMARY_DAYS, capacity_days_summary
from rentals.services import allocation_cancel, allocation_extend, quote_create
from rentals.services.maintenance import maintenance_create
from rentals.services.summary import capacity_summary_refresh
from rentals.sql import summary as summary_sql
from tests.support.booking import book
from tests.support.factories.catalog import NodeFactory, RegionFactory
from tests.support.operators import operator
from tests.support.races import statements_run
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
    now0 = db_now()
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
        _equals_the_exact_reads(GpuModel.objects.get(slug=slug), catalog, frankfurt)
        _windows_equal_the_exact_ones(GpuModel.objects.get(slug=slug), frankfurt)


def _windows_equal_the_exact_ones(model, frankfurt):
    """Start windows from now read from the summary (`kept`) are the exact ones, said as of
    the summary's as_of."""
    as_of = CapacitySummary.objects.get(gpu_model=model).as_of
    for count, days, region_id in itertools.product((1, 3, 8), (1, 7), (None, frankfurt.pk)):
        asked = {"gpu_model": model, "duration": days * DAY, "not_before": as_of,
                 "gpu_count": count, "region_id": region_id}  # fmt: skip
        exact = start_windows(**asked)
        kept = start_windows(**asked, kept=True)
        assert all(w["as_of"] is None for w in exact)
        assert [w["as_of"] for w in kept] == [
            as_of if w["starts_at"] == as_of else None for w in kept
        ]
        assert [{**w, "as_of": None} for w in kept] == exact, (count, days, region_id)


def _equals_the_exact_reads(model, catalog, frankfurt):
    """The model's summary rows equal the exact statements' answers as of its as_of."""
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


def _said(share, first_day):
    """What a node's share says of each of the summary's days from `first_day`: its GPUs
    held, and its booked-ahead GPU-µs (read shifted where it was computed on an earlier day,
    as the incremental refresh reads it)."""
    shift = (share.first_day - first_day).days
    steps = [(k + shift, b) for k, b in zip([0, *share.busy_from], [0, *share.busy], strict=True)]
    busy = [0] * SUMMARY_DAYS
    for (k, b), (until, _b) in zip(steps, [*steps[1:], (SUMMARY_DAYS, 0)], strict=True):
        for day in range(max(k, 0), until):
            busy[day] = b
    us, whole = [0] * SUMMARY_DAYS, [0] * SUMMARY_DAYS
    for i, part_us, part_whole in zip(
        share.booked_day, share.booked_us, share.booked_whole, strict=True
    ):
        whole[max(i + shift, 0)] += part_whole
        if i + shift >= 0:
            us[i + shift] += part_us
    booked, running = [], 0
    for day in range(SUMMARY_DAYS):
        running += whole[day]
        booked.append(us[day] + running * 86_400 * US)
    return tuple(busy), tuple(booked)


def _rows(model):
    """Every row the model's summary keeps, its as_of and ids aside; the nodes' shares by
    what they say of each day."""
    of = {"gpu_model": model}
    first_day = CapacitySummary.objects.get(gpu_model=model).as_of.date()
    return {
        "days": sorted(CapacityDay.objects.filter(**of).values_list(
            "region_id", "day", "max_gpus_on_one_node", "free_whole_nodes", "free_gpus")),
        "nodes": sorted(CapacityNode.objects.filter(**of).values_list(
            "node_id", "region_id", "gpus", "free_now", "min_free_30d")),
        "ahead": sorted(BookedAheadDay.objects.filter(**of).values_list("day", "gpu_us")),
        "buckets": sorted(CapacityBucket.objects.filter(**of).values_list(
            "region_id", "day", "gpus", "busy", "nodes")),
        "shares": sorted(
            (s.node_id, s.region_id, s.gpus, s.counted, s.due_at, *_said(s, first_day))
            for s in CapacityNodeDays.objects.filter(**of)
        ),
    }  # fmt: skip


def _equals_a_full_refresh(model, now):
    """The rows an incremental refresh left equal those a full one writes at the same
    instant (which is rolled back: the next incremental refresh starts from the first's)."""
    kept = _rows(model)
    with transaction.atomic():
        assert isinstance(
            capacity_summary_refresh(gpu_model_id=model.pk, full=True, now=now), float
        )
        assert _rows(model) == kept
        transaction.set_rollback(True)


_STEPS = st.one_of(
    # from now or near the days' end (the holdings a new day's refresh recomputes)
    st.tuples(st.just("book"), st.sampled_from(["h100", "l4"]),
              st.one_of(st.integers(0, 40), st.integers(86, 92)),
              st.integers(0, 23), st.integers(1, 8), st.sampled_from(["day", "week", "month"])),
    st.tuples(st.just("cancel"), st.integers(0, 9)),
    st.tuples(st.just("extend"), st.integers(0, 9)),
    st.tuples(st.just("maintain"), st.integers(0, 5), st.integers(0, 1), st.integers(0, 23),
              st.integers(1, 40)),
    st.tuples(st.just("node_state"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("travel"), st.sampled_from([1, 17, 60, 61, 2 * 60, 5 * 60, 13 * 60, 26 * 60])),
    st.tuples(st.just("midnight"), st.integers(0, 90)),  # minutes into the next UTC day
    st.tuples(st.just("refresh")),
)  # fmt: skip


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(steps=st.lists(_STEPS, min_size=4, max_size=16))
def test_incremental_refreshes_equal_a_full_one_and_the_exact_reads(
    catalog, frankfurt, alice, steps
):
    """Bookings, cancels, extensions, maintenance windows (moving or cancelling what is in
    their way), nodes leaving and rejoining the active fleet, and time passing (within a UTC
    day and across one), with refreshes between them: after each refresh every model's rows
    equal a full refresh's at the same instant and the exact statements' answers."""
    with transaction.atomic():  # each example from the same fleet
        _incremental_equals_full(catalog, frankfurt, alice, [*steps, ("refresh",)])
        transaction.set_rollback(True)


def _incremental_equals_full(catalog, frankfurt, alice, steps):
    ops = operator()
    clock = db_now()
    models = [GpuModel.objects.get(slug=slug) for slug in ("h100", "l4", "mi300x")]
    for model in models:  # the first refresh of a model reads it whole
        capacity_summary_refresh(gpu_model_id=model.pk, now=clock)
    booked: list[Allocation] = []
    nodes = list(Node.objects.filter(gpu_model__slug__in=["h100", "l4"]).order_by("pk"))
    for step in steps:
        kind, args = step[0], step[1:]
        base = clock.replace(minute=0, second=0, microsecond=0)
        if kind == "book":
            model, days, hours, count, period = args
            with contextlib.suppress(NoCapacity):
                booked.append(book(
                    alice, model=model, count=min(count, 4 if model == "l4" else 8),
                    period=period, starts_at=base + days * DAY + timedelta(hours=hours + 1),
                ))  # fmt: skip
        elif kind in ("cancel", "extend") and booked:
            allocation = Allocation.objects.get(pk=booked[args[0] % len(booked)].pk)
            with contextlib.suppress(DomainError):
                if kind == "cancel":
                    allocation_cancel(acting=acting_as(alice), allocation=allocation)
                else:
                    allocation_extend(acting=acting_as(alice), allocation=allocation,
                                      period_count=1)  # fmt: skip
        elif kind == "maintain":
            node, days, hours, length = args
            starts = base + days * DAY + timedelta(hours=hours + 1)
            window = {"operator": ops, "nodes": [nodes[node % len(nodes)].hostname],
                      "starts_at": starts, "ends_at": starts + timedelta(hours=length),
                      "reason": "test"}  # fmt: skip
            with contextlib.suppress(DomainError):
                try:
                    maintenance_create(**window)
                except ChoiceMissing as refused:
                    choices = [{"allocation": a["allocation"], "action": a["choices"][-1]}
                               for a in refused.affected]  # fmt: skip
                    maintenance_create(**window, affected=choices)
        elif kind == "node_state":
            node = Node.objects.get(pk=nodes[args[0] % len(nodes)].pk)
            node.state = NodeState.ACTIVE if args[1] else NodeState.MAINTENANCE
            node.save(update_fields=["state"])
        elif kind == "travel":
            clock += timedelta(minutes=args[0])
        elif kind == "midnight":
            midnight = clock.replace(hour=0, minute=0, second=0, microsecond=0) + DAY
            clock = midnight + timedelta(minutes=args[0])
        elif kind == "refresh":
            for model in models:
                assert isinstance(capacity_summary_refresh(gpu_model_id=model.pk, now=clock), float)
                _equals_a_full_refresh(model, clock)
                _equals_the_exact_reads(model, catalog, frankfurt)


@pytest.mark.django_db
def test_a_refresh_after_a_booking_reads_only_its_node_and_a_new_day_its_end(
    catalog, frankfurt, alice
):
    h100 = GpuModel.objects.get(slug="h100")
    today = db_now()
    now = today.replace(hour=1, minute=0, second=0, microsecond=0) + DAY  # tomorrow, 01:00
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=now)  # none yet: the full refresh
    assert summary_sql.REFRESH in ran and summary_sql.REFRESH_NODES not in ran
    allocation = book(
        alice, model="h100", count=2, period="day", starts_at=now + timedelta(hours=2)
    )
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=now + timedelta(minutes=1))
    assert summary_sql.REFRESH_NODES in ran and summary_sql.REFRESH not in ran
    node = CapacityNode.objects.get(node=allocation.node)
    assert node.free_now == node.gpus and node.min_free_30d == node.gpus - 2
    assert CapacityNodeDays.objects.get(node=allocation.node).due_at == allocation.paid_from
    # Nothing changed and nothing due: the rows stand, as of now.
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=now + timedelta(minutes=2))
    assert summary_sql.STANDS in ran and summary_sql.REFRESH_NODES not in ran
    assert CapacitySummary.objects.get(gpu_model=h100).as_of == now + timedelta(minutes=2)
    # Its start passes: the node is due, and only it is read.
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=allocation.paid_from)
    assert summary_sql.REFRESH_NODES in ran
    assert CapacityNode.objects.get(node=allocation.node).free_now == node.gpus - 2
    _equals_the_exact_reads(h100, catalog, frankfurt)
    # A maintenance window on another node ends within the day: that node is due at its end
    # (its GPUs free again now, and today's count, which counts from now, drops it).
    other = Node.objects.filter(gpu_model=h100).exclude(pk=allocation.node_id).first()
    window = maintenance_create(
        operator=operator(), nodes=[other.hostname], starts_at=now + timedelta(hours=4),
        ends_at=now + timedelta(hours=6), reason="test",
    )  # fmt: skip
    capacity_summary_refresh(gpu_model_id=h100.pk, now=now + timedelta(hours=5))
    assert CapacityNode.objects.get(node=other).free_now == 0
    assert CapacityNodeDays.objects.get(node=other).due_at == window.ends_at
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=window.ends_at)
    assert summary_sql.REFRESH_NODES in ran
    assert CapacityNode.objects.get(node=other).free_now == other.gpu_count
    _equals_the_exact_reads(h100, catalog, frankfurt)
    # A booking 30 days and a few hours on enters the fewest-free horizon within the day.
    later = book(
        alice, model="h100", count=8, period="day", starts_at=now + 30 * DAY + timedelta(hours=9)
    )
    capacity_summary_refresh(gpu_model_id=h100.pk, now=now + timedelta(hours=7))
    assert CapacityNode.objects.get(node=later.node).min_free_30d == 8
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=now + timedelta(hours=10))
    assert summary_sql.REFRESH_NODES in ran
    assert CapacityNode.objects.get(node=later.node).min_free_30d == 0
    _equals_the_exact_reads(h100, catalog, frankfurt)
    # A new UTC day moves the days on: yesterday's rows go, the new last day is added, and
    # only the nodes due and those with holdings at the days' end are read.
    # One holding runs past the days' end, one ends on their last day (another node).
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) + DAY
    end = book(alice, model="h100", count=8, period="week", starts_at=now + 88 * DAY)
    last = book(alice, model="h100", count=1, period="day",
                starts_at=midnight + 89 * DAY + timedelta(hours=5))  # fmt: skip
    assert end.node_id != last.node_id
    capacity_summary_refresh(gpu_model_id=h100.pk, now=midnight - timedelta(seconds=1))
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=midnight)
    assert summary_sql.ROLL in ran and summary_sql.REFRESH_NODES in ran
    assert summary_sql.REFRESH not in ran
    assert {share.node_id for share in CapacityNodeDays.objects.filter(
        gpu_model=h100, first_day=midnight.date())} == {end.node_id, last.node_id}  # fmt: skip
    _equals_the_exact_reads(h100, catalog, frankfurt)
    _equals_a_full_refresh(h100, midnight)
    # Two days on (no worker for a day): the full refresh.
    with statements_run() as ran:
        capacity_summary_refresh(gpu_model_id=h100.pk, now=midnight + 2 * DAY)
    assert summary_sql.REFRESH in ran
    _equals_the_exact_reads(h100, catalog, frankfurt)


@pytest.mark.django_db
def test_a_stale_or_missing_summary_falls_back_to_the_exact_read(catalog, alice):
    h100 = GpuModel.objects.get(slug="h100")
    book(alice, model="h100", count=3, period="week")
    now = db_now()
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
    assert 'id="windows-as-of"' in page  # the earliest start from now, from the summary too
    api = client.get("/api/v1/availability/?gpu_model=h100&gpu_count=2&period=day").json()
    assert api["windows"][0]["as_of"] == api["as_of"] is not None
    CapacitySummary.objects.update(as_of=CapacitySummary.objects.get().as_of - timedelta(hours=1))
    page = client.get("/book/h100/").content.decode()
    assert 'id="calendar-as-of"' not in page
    assert 'id="windows-as-of"' not in page
    api = client.get("/api/v1/availability/?gpu_model=h100&gpu_count=2&period=day").json()
    assert api["windows"][0]["as_of"] is None


@pytest.mark.django_db
def test_the_catalog_reads_gpus_free_now_from_the_summary_and_says_as_of(
    catalog, alice, bob, client, api, django_capture_on_commit_callbacks
):
    """Where every model's summary is fresh the catalog's GPUs free now are its, as of its
    refresh (a booking since is not counted until the next one), on the page and in the
    API; stale or missing, the holdings are read and no "as of" is said."""
    book(alice, model="h100", count=3, period="week")
    exact = {m.slug: m.free_gpus_now for m in gpu_model_offers()}
    assert {m.free_gpus_as_of for m in gpu_model_offers()} == {None}
    assert "as-of" not in client.get("/").content.decode()
    _refresh_all()
    kept = {m.slug: (m.free_gpus_now, m.free_gpus_as_of) for m in gpu_model_offers()}
    as_of = CapacitySummary.objects.get(gpu_model__slug="h100").as_of
    assert {slug: free for slug, (free, _at) in kept.items()} == exact
    assert kept["h100"][1] == as_of
    page = client.get("/").content.decode()
    assert f"(as of {as_of:%H:%M:%S})" in page
    listed = {m["slug"]: m for m in api.get("/api/v1/gpu-models/").json()["results"]}
    assert listed["h100"]["free_gpus_now"] == exact["h100"]
    assert listed["h100"]["free_gpus_as_of"] is not None
    # A booking: the summary still says what it did until its refresh, which the API's
    # cached answer follows (the refresh moves the catalog's version on).
    with django_capture_on_commit_callbacks(execute=True):
        book(bob, model="h100", count=2, period="day")
    assert {m.slug: m.free_gpus_now for m in gpu_model_offers()} == exact
    listed = {m["slug"]: m for m in api.get("/api/v1/gpu-models/").json()["results"]}
    assert listed["h100"]["free_gpus_now"] == exact["h100"]  # as of the refresh before
    with django_capture_on_commit_callbacks(execute=True):
        _refresh_all()
    assert {m.slug: m.free_gpus_now for m in gpu_model_offers()} == {
        **exact,
        "h100": exact["h100"] - 2,
    }
    listed = {m["slug"]: m for m in api.get("/api/v1/gpu-models/").json()["results"]}
    assert listed["h100"]["free_gpus_now"] == exact["h100"] - 2
    # One model's rows too old: read exactly, no "as of" for it.
    CapacitySummary.objects.filter(gpu_model__slug="l4").update(as_of=as_of - timedelta(hours=1))
    offers = {m.slug: m for m in gpu_model_offers()}
    assert offers["l4"].free_gpus_as_of is None and offers["h100"].free_gpus_as_of is not None
    assert offers["l4"].free_gpus_now == exact["l4"]


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
