"""Maintenance windows: holds under the bookings' exclusion constraint, seen by every read of
free time, never stranding a booking (each is moved or cancelled, as staff choose), told to
its owner in their language; bad input refused with nothing changed."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import translation
from rest_framework.test import APIClient

from accounts.errors import NotAllowed
from accounts.roles import acting_as
from accounts.services.profile import account_preferences_set
from catalog.models import Node, NodeState
from core.db import db_now
from core.errors import Conflict, Invalid
from rentals.errors import ChoiceMissing, NoCapacity
from rentals.models import (
    Allocation,
    AllocationGpu,
    EventKind,
    LedgerEntry,
    MaintenanceWindow,
    Notice,
    NoticeKind,
)
from rentals.selectors.availability import availability_days, earliest_start, gpu_model_offers
from rentals.services import allocation_book, quote_create
from rentals.services.maintenance import maintenance_create
from rentals.texts import notice_subject, notice_text, reader_preferences
from tests.support.booking import book
from tests.support.factories.accounts import UserFactory
from tests.support.operators import operator
from tests.support.oracles import node_desired_state
from tests.support.races import in_thread, overlapping_pairs
from tests.support.transactions import held_open
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def ops(db):
    return operator()


def _l4_node():
    return Node.objects.get(gpu_model__slug="l4")


def _nothing_written(holds_before):
    assert MaintenanceWindow.objects.count() == 0
    assert AllocationGpu.objects.filter(maintenance__isnull=False).count() == 0
    assert AllocationGpu.objects.count() == holds_before


def test_a_window_is_a_hold_that_quotes_the_calendar_and_start_windows_see(catalog, ops, alice):
    now = db_now()
    node = _l4_node()
    window = maintenance_create(
        operator=ops, nodes=[node.hostname], starts_at=now, ends_at=now + timedelta(hours=30),
        reason="firmware update",
    )  # fmt: skip
    assert window.held.count() == 4 and window.outcome == []

    with pytest.raises(NoCapacity) as refused:
        quote_create(acting=acting_as(alice), gpu_model="l4", gpu_count=1, period="day",
                     period_count=1)  # fmt: skip
    assert refused.value.earliest_start == window.ends_at  # the first start that fits
    assert earliest_start(gpu_model=catalog.l4, duration=timedelta(days=1),
                          not_before=now) == window.ends_at  # fmt: skip
    days = availability_days(gpu_model=catalog.l4, start=now, days=4)  # UTC days
    assert [d["max_gpus_on_one_node"] for d in days][::3] == [0, 4]  # 30 h: not past day 3
    assert {m.slug: m.free_gpus_now for m in gpu_model_offers()}["l4"] == 0
    later = quote_create(
        acting=acting_as(alice), gpu_model="l4", gpu_count=4, period="day", period_count=1,
        starts_at=window.ends_at,
    )  # fmt: skip
    assert later.paid_from == window.ends_at


def test_a_window_over_bookings_is_refused_without_choices_and_nothing_changes(catalog, ops, alice):
    now = db_now()
    running = book(alice, model="l4", count=2, period="week")
    holds = AllocationGpu.objects.count()
    with pytest.raises(ChoiceMissing) as refused:
        maintenance_create(
            operator=ops, nodes=[_l4_node().hostname], starts_at=now + timedelta(days=2),
            ends_at=now + timedelta(days=2, hours=4), reason="PSU swap",
        )  # fmt: skip
    assert [(a["allocation"], a["choices"]) for a in refused.value.affected] == [
        (str(running.pk), ["move"])
    ]
    _nothing_written(holds)


def test_moved_bookings_keep_their_period_and_price_cancelled_ones_are_refunded_in_full(
    catalog, ops, alice, bob
):
    now = db_now()
    account_preferences_set(user=bob, language="pl", time_zone="Europe/Warsaw")
    small = Node.objects.get(gpu_model__slug="h100", gpu_count=4)
    running = book(alice, model="h100", count=2, period="week")
    scheduled = book(bob, model="h100", count=1, period="day", starts_at=now + timedelta(days=3))
    assert running.node_id == scheduled.node_id == small.pk  # packed onto the fullest node
    charged = {a.pk: LedgerEntry.objects.get(allocation=a).amount for a in (running, scheduled)}
    starts = now + timedelta(days=3)

    window = maintenance_create(
        operator=ops, nodes=[small.hostname], starts_at=starts, ends_at=starts + timedelta(hours=4),
        reason="PSU swap",
        affected=[{"allocation": running.pk, "action": "move"},
                  {"allocation": scheduled.pk, "action": "cancel"}],
    )  # fmt: skip

    assert sorted(done.action for done in window.outcome) == ["cancel", "move"]
    moved = Allocation.objects.get(pk=running.pk)
    assert (moved.paid_from, moved.paid_until, moved.state) == (
        running.paid_from, running.paid_until, "running"
    )  # fmt: skip
    assert moved.node_id != small.pk and moved.node.gpu_model_id == catalog.h100.pk
    assert moved.node.region_id == small.region_id
    now_held = list(moved.held.filter(ends_at=moved.paid_until))
    assert len(now_held) == 2 and {h.gpu.node_id for h in now_held} == {moved.node_id}
    assert list(LedgerEntry.objects.filter(allocation=moved).values_list("kind", "amount")) == [
        ("charge", charged[running.pk])
    ]  # the same price, charged once
    move = moved.events.get(kind=EventKind.MOVE)
    assert move.note.startswith(f"{small.hostname} #") and f"→ {moved.node.hostname} #" in move.note
    cancelled = Allocation.objects.get(pk=scheduled.pk)
    assert cancelled.state == "cancelled"
    assert (
        LedgerEntry.objects.get(allocation=cancelled, kind="refund").amount == charged[scheduled.pk]
    )
    assert window.held.count() == 4 and overlapping_pairs() == 0
    # Access moved with the GPUs: the old node's state no longer lists it, the new one's does.
    assert str(moved.pk) not in str(node_desired_state(node=small, now=db_now()))
    assert str(moved.pk) in str(node_desired_state(node=moved.node, now=db_now()))

    notices = {n.allocation_id: n for n in Notice.objects.filter(maintenance=window)}
    assert {n.kind for n in notices.values()} == {
        NoticeKind.MAINTENANCE_MOVED, NoticeKind.MAINTENANCE_CANCELLED
    }  # fmt: skip
    with translation.override("en"), reader_preferences(bob):
        text = notice_text(notices[scheduled.pk])
        subject = notice_subject(notices[scheduled.pk])
    assert "zwrócono w całości" in text and "PSU swap" in text and subject.startswith("Prace")
    with reader_preferences(alice):
        assert moved.node.hostname in notice_text(notices[running.pk])


def test_bad_windows_are_refused_and_change_nothing(catalog, ops, alice):
    now = db_now()
    node = _l4_node()
    retired = Node.objects.get(gpu_model__slug="mi300x")
    retired.state = NodeState.RETIRED
    retired.save(update_fields=["state"])
    hour = timedelta(hours=1)
    cases = {
        "ends_at": dict(nodes=[node.hostname], starts_at=now + 2 * hour, ends_at=now + hour),
        "starts_at": dict(nodes=[node.hostname], starts_at=now - 3 * hour, ends_at=now + hour),
        "nodes": dict(nodes=[retired.hostname], starts_at=now + hour, ends_at=now + 2 * hour),
        "gpus": dict(gpus=["GPU-no-such"], starts_at=now + hour, ends_at=now + 2 * hour),
    }
    in_the_past = dict(nodes=[node.hostname], starts_at=now - 3 * hour, ends_at=now - 2 * hour)
    holds = AllocationGpu.objects.count()
    for field, request in [*cases.items(), ("ends_at", in_the_past)]:
        with pytest.raises(Invalid) as refused:
            maintenance_create(operator=ops, reason="r", **request)
        assert field in refused.value.errors, (field, refused.value.errors)
    _nothing_written(holds)

    first = maintenance_create(
        operator=ops, gpus=[node.gpus.get(index=1).uuid], starts_at=now + hour,
        ends_at=now + 3 * hour, reason="reseat",
    )  # fmt: skip
    with pytest.raises(Conflict, match="already in maintenance"):
        maintenance_create(
            operator=ops, nodes=[node.hostname], starts_at=now + 2 * hour,
            ends_at=now + 4 * hour, reason="again",
        )  # fmt: skip
    assert list(MaintenanceWindow.objects.all()) == [first]

    book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(days=5))
    with pytest.raises(Invalid) as soon:  # bookings in its way: a day's notice first
        maintenance_create(
            operator=ops, nodes=[node.hostname], starts_at=now + 5 * hour,
            ends_at=now + timedelta(days=6), reason="soon",
            affected=[{"allocation": Allocation.objects.get().pk, "action": "cancel"}],
        )  # fmt: skip
    assert "starts_at" in soon.value.errors
    assert MaintenanceWindow.objects.count() == 1


def test_only_staff_with_the_permission_schedule_windows(catalog, staff, alice):
    now = db_now()
    for user in (alice, staff):
        with pytest.raises(NotAllowed):
            maintenance_create(
                operator=user, nodes=[_l4_node().hostname], starts_at=now + timedelta(hours=1),
                ends_at=now + timedelta(hours=2), reason="r",
            )  # fmt: skip
    assert MaintenanceWindow.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_window_and_24_bookings_race_for_the_same_gpus_and_never_both_win(catalog):
    ops = operator()
    starts = db_now() + timedelta(days=2)
    users = UserFactory.create_batch(24)
    quotes = [
        quote_create(acting=acting_as(u), gpu_model="l4", gpu_count=1, period="day",
                     period_count=1, starts_at=starts)
        for u in users
    ]  # fmt: skip
    node = _l4_node()
    barrier = threading.Barrier(len(users) + 1)

    @in_thread
    def booking(i):
        barrier.wait()
        try:
            allocation_book(acting=acting_as(users[i]), quote=quotes[i])
            return "booked"
        except NoCapacity:
            return "no_capacity"

    @in_thread
    def window():
        barrier.wait()
        try:
            maintenance_create(
                operator=ops, nodes=[node.hostname], starts_at=starts + timedelta(hours=1),
                ends_at=starts + timedelta(hours=5), reason="race",
            )  # fmt: skip
            return "window"
        except ChoiceMissing as refused:
            return ("refused", len(refused.affected))

    with ThreadPoolExecutor(len(users) + 1) as pool:
        window_result = pool.submit(window)
        results = list(pool.map(booking, range(len(users))))
        window_result = window_result.result()

    booked = results.count("booked")
    if window_result == "window":
        assert booked == 0 and MaintenanceWindow.objects.count() == 1
        assert AllocationGpu.objects.filter(allocation__isnull=False).count() == 0
    else:  # bookings committed first: the window saw them in its way and was refused
        refused, seen = window_result
        assert refused == "refused" and 1 <= seen <= booked <= 4
        assert MaintenanceWindow.objects.count() == 0
    assert results.count("no_capacity") == len(users) - booked
    assert overlapping_pairs() == 0


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_window_that_commits_first_wins_over_bookings_waiting_for_its_node(catalog):
    """The other order of the race above, made certain: the window holds its node's lock
    until it commits; the bookings queue behind it and then find the GPUs held."""
    ops = operator()
    starts = db_now() + timedelta(days=2)
    users = UserFactory.create_batch(6)
    quotes = [
        quote_create(acting=acting_as(u), gpu_model="l4", gpu_count=1, period="day",
                     period_count=1, starts_at=starts)
        for u in users
    ]  # fmt: skip
    node = _l4_node()

    @in_thread
    def booking(i):
        try:
            allocation_book(acting=acting_as(users[i]), quote=quotes[i])
            return "booked"
        except NoCapacity:
            return "no_capacity"

    window = lambda: maintenance_create(  # noqa: E731
        operator=ops, nodes=[node.hostname], starts_at=starts, ends_at=starts + timedelta(days=1),
        reason="race",
    )  # fmt: skip
    with ThreadPoolExecutor(len(users)) as pool:
        with held_open(window):
            pending = [pool.submit(booking, i) for i in range(len(users))]
            deadline = time.monotonic() + 8
            while _waiting_on_locks() < len(users) and time.monotonic() < deadline:
                time.sleep(0.05)
        results = [p.result() for p in pending]
    assert results == ["no_capacity"] * len(users)
    assert MaintenanceWindow.objects.count() == 1 and not Allocation.objects.exists()


def test_the_api_names_the_bookings_in_the_way_then_schedules_with_a_choice_and_tells_webhooks(
    catalog, alice, alice_api, settings
):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    endpoint, _secret = endpoint_create(
        acting=acting_as(alice), url="http://127.0.0.1:9/hook",
        events=["allocation.maintenance", "allocation.cancelled"],
    )  # fmt: skip
    ops_api = APIClient()
    ops_api.force_authenticate(operator())
    now = db_now()
    scheduled = book(alice, model="l4", count=2, period="day", starts_at=now + timedelta(days=3))
    body = {
        "nodes": [_l4_node().hostname], "reason": "cooling loop",
        "starts_at": (now + timedelta(days=3)).isoformat(),
        "ends_at": (now + timedelta(days=3, hours=2)).isoformat(),
    }  # fmt: skip

    asked = ops_api.post("/api/v1/maintenance/", body, format="json")
    assert asked.status_code == 409 and asked["Content-Type"] == "application/problem+json"
    problem = asked.json()
    assert problem["code"] == "affected_allocations"
    assert [(a["allocation"], a["choices"], len(a["gpus"])) for a in problem["affected"]] == [
        (str(scheduled.pk), ["move", "cancel"], 2)
    ]
    moving = {**body, "affected": [{"allocation": str(scheduled.pk), "action": "move"}]}
    no_spare = ops_api.post("/api/v1/maintenance/", moving, format="json")
    assert (no_spare.status_code, no_spare.json()["code"]) == (409, "no_spare")  # one L4 node
    assert alice_api.post("/api/v1/maintenance/", moving, format="json").status_code == 403
    assert MaintenanceWindow.objects.count() == 0
    assert Allocation.objects.get(pk=scheduled.pk).state == "scheduled"

    cancelling = {**body, "affected": [{"allocation": str(scheduled.pk), "action": "cancel"}]}
    created = ops_api.post("/api/v1/maintenance/", cancelling, format="json")
    assert created.status_code == 201, created.content
    window = created.json()
    assert (window["nodes"], len(window["gpus"]), window["reason"]) == (
        [_l4_node().hostname], 4, "cooling loop"
    )  # fmt: skip
    assert [(a["allocation"], a["action"]) for a in window["affected"]] == [
        (str(scheduled.pk), "cancel")
    ]
    sent = {d.event_type: json.loads(d.payload) for d in endpoint.deliveries.all()}
    assert set(sent) == {"allocation.maintenance", "allocation.cancelled"}
    told = sent["allocation.maintenance"]["data"]
    assert (told["action"], told["maintenance"]["reason"]) == ("cancelled", "cooling loop")
    listed = ops_api.get("/api/v1/maintenance/").json()["results"]
    assert [w["id"] for w in listed] == [window["id"]] and "affected" not in listed[0]


def test_the_admin_schedules_a_window_through_the_same_service(catalog, client, alice):
    client.force_login(operator())
    now = db_now()
    node = _l4_node()
    scheduled = book(alice, model="l4", count=1, period="day", starts_at=now + timedelta(days=3))
    form = {
        "nodes": [node.pk], "reason": "rack move",
        "starts_at_0": (now + timedelta(days=3)).strftime("%Y-%m-%d"),
        "starts_at_1": (now + timedelta(days=3)).strftime("%H:%M:%S"),
        "ends_at_0": (now + timedelta(days=4)).strftime("%Y-%m-%d"),
        "ends_at_1": (now + timedelta(days=4)).strftime("%H:%M:%S"),
        "held-TOTAL_FORMS": "0", "held-INITIAL_FORMS": "0",
    }  # fmt: skip
    listed = client.post("/admin/rentals/maintenancewindow/add/", form)
    assert listed.status_code == 200 and str(scheduled.pk) in listed.content.decode()
    assert MaintenanceWindow.objects.count() == 0
    done = client.post(
        "/admin/rentals/maintenancewindow/add/", {**form, "choices": f"{scheduled.pk} cancel"}
    )
    assert done.status_code == 302, done.content.decode()[:3000]
    window = MaintenanceWindow.objects.get()
    assert window.held.count() == 4 and window.reason == "rack move"
    assert Allocation.objects.get(pk=scheduled.pk).state == "cancelled"
    assert client.get(f"/admin/rentals/maintenancewindow/{window.pk}/change/").status_code == 200
