"""Availability before asking: the calendar and the start windows agree with what booking
then allows, and a quote that lost its capacity comes back with the earliest start."""

import contextlib
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.models import GpuModel, Node, NodeState
from core.db import db_now
from rentals.errors import NoCapacity
from rentals.models import Allocation, AllocationGpu
from rentals.selectors.availability import (
    WINDOW_NODES_SHOWN,
    availability_calendar,
    availability_days,
    calendar_scale_steps,
    calendar_shade,
    candidate_nodes,
    fits,
    max_gpus_per_node,
    start_windows,
)
from rentals.services import allocation_book, allocation_cancel, quote_create
from tests.support.booking import book, key
from tests.support.factories.catalog import NodeFactory, RegionFactory

pytestmark = pytest.mark.django_db
DAY = timedelta(days=1)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    bookings=st.lists(
        st.tuples(st.integers(0, 5), st.integers(1, 8), st.sampled_from(["day", "week"])),
        max_size=6,
    )
)
def test_the_calendar_equals_what_booking_then_allows(catalog, alice, bookings):
    h100 = GpuModel.objects.get(slug="h100")
    with transaction.atomic():
        now = db_now()
        for starts_in, count, period in bookings:
            with contextlib.suppress(NoCapacity):  # a full fleet refuses; the calendar agrees
                book(alice, model="h100", count=count, period=period,
                     starts_at=now + starts_in * DAY + timedelta(hours=1))  # fmt: skip
        days = availability_days(gpu_model=h100, start=now, days=10)
        for day in days[1:]:  # whole future days
            start = now.replace(hour=0, minute=0, second=0, microsecond=0)
            start += (day["date"] - start.date()).days * DAY
            most = day["max_gpus_on_one_node"]
            if most:
                assert fits(gpu_model=h100, gpu_count=most, starts_at=start, ends_at=start + DAY)
            assert not fits(
                gpu_model=h100, gpu_count=most + 1, starts_at=start, ends_at=start + DAY
            )
        transaction.set_rollback(True)


def test_the_first_window_is_where_a_booking_then_lands(catalog, alice):
    h100 = GpuModel.objects.get(slug="h100")
    for _ in range(2):
        book(alice, model="h100", count=8, period="day")  # both 8-GPU nodes are taken today
    now = db_now()
    (first, *_rest) = start_windows(
        gpu_model=h100, duration=DAY, not_before=now, gpu_count=8, limit=3
    )
    assert first["starts_at"] > now and first["nodes"]
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h100", gpu_count=8, period="day", period_count=1,
        starts_at=first["starts_at"],
    )  # fmt: skip
    allocation = allocation_book(acting=acting_as(alice), quote=quote)
    assert allocation.node.hostname in first["nodes"]


def test_the_api_answers_before_any_quote(catalog, alice, alice_api):
    book(alice, model="l4", count=4, period="day")  # the one L4 node, for a day
    body = alice_api.get(
        "/api/v1/availability/", {"gpu_model": "l4", "gpu_count": 2, "period": "day"}
    ).json()
    assert body["days"][0]["max_gpus_on_one_node"] == 0 and len(body["days"]) == 90
    assert body["days"][2]["max_gpus_on_one_node"] == 4
    assert body["earliest_start"] == body["windows"][0]["starts_at"]
    whole = alice_api.get("/api/v1/availability/", {"gpu_model": "h100", "node_count": 2}).json()
    assert len(whole["windows"][0]["nodes"]) >= 2
    for bad in ({"gpu_model": "nope"}, {"gpu_model": "l4", "gpu_count": 99},
                {"gpu_model": "l4", "gpu_count": 1, "node_count": 1},
                {"gpu_model": "l4", "from": "2027-01-10T00:00:00Z", "to": "2028-01-10T00:00:00Z"}):  # fmt: skip
        assert alice_api.get("/api/v1/availability/", bad).status_code == 400


def test_a_window_names_at_most_a_bounded_number_of_nodes_with_how_many_there_are(
    catalog, alice, alice_api
):
    """Forty L4 nodes more: the window names WINDOW_NODES_SHOWN of them, the fullest first
    (the one with a GPU taken), and says that 41 fit; the body does not grow with the
    fleet."""
    region = catalog.nodes[0].region
    for _node in range(40):
        NodeFactory(gpu_model=catalog.l4, region=region, gpus=4)
    taken = book(alice, model="l4", count=1, period="day").node
    body = alice_api.get(
        "/api/v1/availability/", {"gpu_model": "l4", "gpu_count": 2, "period": "day"}
    ).json()
    first = body["windows"][0]
    assert len(first["nodes"]) == WINDOW_NODES_SHOWN and first["nodes_total"] == 41
    assert first["nodes"][0] == taken.hostname
    whole = start_windows(
        gpu_model=catalog.l4, duration=timedelta(days=1), not_before=db_now(), gpu_count=4,
        limit=1,
    )  # fmt: skip
    assert len(whole[0]["nodes"]) == WINDOW_NODES_SHOWN and whole[0]["nodes_total"] == 40


def test_the_booking_page_shows_the_calendar_and_the_earliest_start(catalog, alice, client):
    book(alice, model="l4", count=4, period="day")
    client.force_login(alice)
    page = client.get("/book/l4/", {"gpu_count": 2, "period": "day", "period_count": 1})
    html = page.content.decode()
    assert 'id="availability"' in html and "2 GPUs on one node fit from" in html
    start_then = page.context["start_then"]
    query = parse_qs(urlsplit(start_then).query)
    assert query["start"] == ["later"] and query["gpu_count"] == ["2"]
    form = client.get(start_then).context["form"]
    assert form.initial["start"] == "later"


def test_a_quote_that_lost_its_capacity_comes_back_with_the_earliest_start(
    catalog, alice, bob, client
):
    client.force_login(alice)
    mine = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=4, period="day", period_count=1,
        options=[{"option": "nvme-scratch", "quantity": 2}],
    )  # fmt: skip
    book(bob, model="l4", count=4, period="day")  # bob takes the node first
    response = client.post(f"/quotes/{mine.pk}/book/", {"idempotency_key": key()})
    query = parse_qs(urlsplit(response["Location"]).query)
    assert query["start"] == ["later"] and query["option_nvme-scratch"] == ["2"]
    assert query["gpu_count"] == ["4"] and query["period"] == ["day"]
    assert Allocation.objects.filter(user=alice).count() == 0


def test_candidate_nodes_are_the_nodes_with_room_fullest_first(catalog, alice):
    """Placement's fallback list against a count in Python: nodes of the model with at least
    the GPUs asked free for the whole period, fewest free first, then by id."""
    h100 = GpuModel.objects.get(slug="h100")
    now = db_now()
    first = book(alice, model="h100", count=3, period="day")
    # Packed onto the same node's same GPUs from the moment the first ends: a window across
    # that instant holds each of them twice, and each counts once.
    again = book(alice, model="h100", count=3, period="day", starts_at=first.paid_until)
    assert again.node_id == first.node_id
    assert set(again.held.values_list("gpu", flat=True)) == set(
        first.held.values_list("gpu", flat=True)
    )
    book(alice, model="h100", count=1, period="week", starts_at=now + 2 * DAY)
    cases = [(1, now), (1, now + DAY / 2), (2, now + DAY / 2), (6, now), (6, now + 2 * DAY)]
    for count, start in cases:
        end = start + DAY
        free = {}
        for node in Node.objects.filter(gpu_model=h100, state=NodeState.ACTIVE):
            held = {
                g.gpu_id
                for g in AllocationGpu.objects.filter(
                    gpu__node=node, released=False, starts_at__lt=end, ends_at__gt=start
                )
            }
            free[node.pk] = node.gpus.count() - len(held)
        expected = sorted((n for n, f in free.items() if f >= count), key=lambda n: (free[n], n))
        got = candidate_nodes(gpu_model=h100, gpu_count=count, starts_at=start, ends_at=end)
        assert got == expected, (count, start)
        assert fits(gpu_model=h100, gpu_count=count, starts_at=start, ends_at=end) == bool(expected)


def _recount(gpu_model, start, days, region=None):
    """The calendar recounted the slow way, per node and day, from the holdings and the rule
    the exclusion guards: a GPU is busy on a day when a live holding of it overlaps the day
    (from `start`, for today)."""
    first = start.replace(hour=0, minute=0, second=0, microsecond=0)
    nodes = Node.objects.filter(gpu_model=gpu_model, state=NodeState.ACTIVE, gpu_count__gt=0)
    if region is not None:
        nodes = nodes.filter(region=region)
    rows = []
    for k in range(days):
        day_starts = first + k * DAY
        free = []
        for node in nodes:
            busy = (
                AllocationGpu.objects.filter(
                    gpu__node=node,
                    released=False,
                    starts_at__lt=day_starts + DAY,
                    ends_at__gt=max(day_starts, start),
                )  # fmt: skip
                .values("gpu")
                .distinct()
                .count()
            )
            free.append((node.gpu_count, node.gpu_count - busy))
        rows.append(
            {
                "date": day_starts.date(),
                "max_gpus_on_one_node": max((f for _, f in free), default=0),
                "free_whole_nodes": sum(1 for gpus, f in free if f == gpus),
                "free_gpus": sum(f for _, f in free),
            }
        )
    return rows if free else []


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    bookings=st.lists(
        st.tuples(
            st.integers(0, 100),  # hours from now
            st.sampled_from([1, 2, 4, 8]),
            st.sampled_from(["day", "week"]),
            st.booleans(),  # cancelled (released) before it starts
        ),
        max_size=7,
    ),
    node_down=st.booleans(),
    in_region=st.booleans(),
    later=st.integers(0, 30),  # the calendar asked from this many hours on
)
def test_the_calendar_equals_a_recount_per_node_and_day(
    catalog, alice, bookings, node_down, in_region, later
):
    """Holdings back to back on one GPU (a whole node for a day, then again from its end),
    released ones, a node taken out of service and a region of its own."""
    h100 = GpuModel.objects.get(slug="h100")
    with transaction.atomic():
        other = RegionFactory(slug="de-fra", name_en="Frankfurt")
        NodeFactory(
            gpu_model=h100, region=other, gpus=8, network_group="fra-1", fabric="RoCE 200 Gb/s"
        )
        now = db_now()
        whole = book(alice, model="h100", count=8, period="day", starts_at=now + 2 * DAY)
        book(alice, model="h100", count=8, period="day", starts_at=whole.paid_until)
        for hours, count, period, cancel in bookings:
            starts_at = now + timedelta(hours=hours) if hours else None
            try:
                allocation = book(alice, model="h100", count=count, period=period,
                                  starts_at=starts_at)  # fmt: skip
            except NoCapacity:
                continue
            if cancel and starts_at:
                allocation_cancel(acting=acting_as(alice), allocation=allocation)
        if node_down:
            Node.objects.filter(pk=whole.node_id).update(state=NodeState.MAINTENANCE)
        region = other if in_region else None
        start = now + timedelta(hours=later)
        days = availability_days(
            gpu_model=h100, start=start, days=12, region_id=region.pk if region else None
        )
        assert days == _recount(h100, start, 12, region)
        transaction.set_rollback(True)


def test_start_windows_from_now_first_then_as_holdings_end(catalog, alice):
    """Where the request fits now, in fewer places than asked for, the later windows follow
    from the holdings' ends, in time order."""
    h100 = GpuModel.objects.get(slug="h100")
    first = book(alice, model="h100", count=8, period="day")  # one 8-GPU node stays free
    now = db_now()
    windows = start_windows(gpu_model=h100, duration=DAY, not_before=now, gpu_count=8, limit=2)
    assert [w["starts_at"] for w in windows] == [now, first.paid_until]
    assert windows[1]["nodes"] == sorted(
        Node.objects.filter(gpu_model=h100, gpu_count=8).values_list("hostname", flat=True)
    )


def test_the_calendar_is_whole_weeks_from_today_tinted_against_the_most_there_could_be(
    catalog, alice
):
    l4 = GpuModel.objects.get(slug="l4")  # one node of four GPUs
    book(alice, model="l4", count=4, period="day")  # full from now until this time tomorrow
    now = db_now()
    per_node = max_gpus_per_node(gpu_model=l4)

    gpus = availability_calendar(gpu_model=l4, start=now, per_node=per_node, whole_nodes=False)
    nodes = availability_calendar(gpu_model=l4, start=now, per_node=per_node, whole_nodes=True)

    assert (gpus.per_node, gpus.nodes) == (4, 1)
    assert [len(week) for week in gpus.weeks] == [7] * 13
    days = [day for week in gpus.weeks for day in week]
    assert (days[0].date, days[-1].date) == (now.date(), (now + 90 * DAY).date())
    assert [(d.free, d.shade) for d in days[:3]] == [(0, 0), (0, 0), (4, 50)]
    assert all(type(d.free_gpus) is int for d in days)
    assert [(s.free, s.shade) for s in gpus.scale] == [(0, 0), (1, 24), (2, 33), (3, 41), (4, 50)]
    whole = [day for week in nodes.weeks for day in week]
    assert [(d.free, d.shade) for d in whole[:3]] == [(0, 0), (0, 0), (1, 50)]
    assert [(s.free, s.shade) for s in nodes.scale] == [(0, 0), (1, 50)]


def test_the_calendar_scale_steps_and_shades():
    assert calendar_scale_steps(3) == [0, 1, 2, 3]
    assert calendar_scale_steps(16) == [0, 2, 4, 6, 8, 10, 12, 14, 16]
    assert [calendar_shade(free, 8) for free in (-1, 0, 1, 8, 9)] == [0, 0, 19, 50, 50]
