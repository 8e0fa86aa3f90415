"""Clusters: whole nodes of one network group, booked, extended and cancelled together."""

import contextlib
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accounts.roles import acting_as
from catalog.models import Gpu
from core.db import db_now
from core.errors import Invalid
from rentals.errors import NoCapacity
from rentals.models import Allocation, AllocationState, Cluster, LedgerEntry, LedgerKind
from rentals.selectors import availability
from rentals.selectors.availability import start_windows
from rentals.services import allocation_book, quote_create
from rentals.sql import capacity as capacity_sql
from tests.support.booking import book, key
from tests.support.factories.catalog import NodeFactory, catalog_setup
from tests.support.races import overlapping_pairs

pytestmark = pytest.mark.django_db


def cluster_quote(user, *, nodes=2, starts_at=None, period="day", periods=1, options=None):
    return quote_create(
        acting=acting_as(user), gpu_model="h100", node_count=nodes, period=period,
        period_count=periods, starts_at=starts_at, options=options,
    )  # fmt: skip


def test_a_cluster_quote_prices_every_gpu_of_its_whole_nodes(catalog, alice):
    quote = cluster_quote(alice, nodes=2, options=[{"option": "nvme-scratch", "quantity": 2}])
    gpu_line = quote.lines.get(kind="gpu")
    assert (quote.node_count, quote.gpu_count, gpu_line.count) == (2, 16, 16)
    assert quote.net_total == gpu_line.amount + quote.lines.get(kind="option").amount
    assert quote.total == quote.net_total + quote.vat_total


def test_booking_a_cluster_holds_whole_nodes_of_one_group_and_charges_once(catalog, alice):
    quote = cluster_quote(alice, nodes=2)
    lead = allocation_book(acting=acting_as(alice), quote=quote)
    cluster = Cluster.objects.get()
    members = list(Allocation.objects.filter(cluster=cluster))
    assert lead.cluster_id == cluster.pk and len(members) == 2 == cluster.node_count
    assert {m.node.network_group for m in members} == {cluster.network_group} == {"ib-1"}
    for member in members:
        assert member.gpu_count == 8 == member.held.count() == member.node.gpus.count()
        assert (member.paid_from, member.paid_until) == (lead.paid_from, lead.paid_until)
    charges = LedgerEntry.objects.filter(kind=LedgerKind.CHARGE)
    assert [(c.allocation_id, c.amount) for c in charges] == [(lead.pk, quote.total)]


def test_a_cluster_never_spans_two_groups_or_takes_a_part_used_node(catalog, alice, bob):
    book(bob, count=5, period="day")  # part of a grouped 8-GPU node: it is not whole
    with pytest.raises(NoCapacity) as refused:
        cluster_quote(alice, nodes=2)
    assert refused.value.earliest_start is not None  # after bob's day
    assert Allocation.objects.count() == 1


def test_asking_for_more_nodes_than_a_group_holds_is_a_field_error(catalog, alice):
    with pytest.raises(Invalid) as refused:
        cluster_quote(alice, nodes=3)
    assert "node_count" in refused.value.errors
    with pytest.raises(Invalid) as both:
        quote_create(
            acting=acting_as(alice), gpu_model="h100", gpu_count=1, node_count=1,
            period="day", period_count=1,
        )  # fmt: skip
    assert "gpu_count" in both.value.errors


def test_the_least_fragmented_group_is_taken(catalog, alice):
    big = [
        NodeFactory(gpu_model=catalog.h100, region=catalog.nodes[0].region, gpus=8,
                    network_group="ib-big", fabric="InfiniBand NDR 400 Gb/s × 8")
        for _ in range(4)
    ]  # fmt: skip
    allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))
    assert Cluster.objects.get().network_group == "ib-1"  # 2 free nodes, not the 4 of ib-big
    assert not Allocation.objects.filter(node__in=big).exists()


def test_cluster_extension_is_all_or_nothing(catalog, alice, bob, alice_api):
    lead = allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))
    members = list(Allocation.objects.filter(cluster=lead.cluster_id).order_by("id"))
    # bob takes one GPU of the second node right after the cluster's paid period
    blocker = book(bob, count=8, period="day", starts_at=lead.paid_until + timedelta(hours=1))
    assert blocker.node_id in {m.node_id for m in members}
    response = alice_api.post(
        f"/api/v1/clusters/{lead.cluster_id}/extend/", {"period_count": 1}, format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    )  # fmt: skip
    assert response.status_code == 409, response.content
    assert {m.paid_until for m in Allocation.objects.filter(cluster=lead.cluster_id)} == {
        lead.paid_until
    }
    assert LedgerEntry.objects.filter(reason="extension").count() == 0

    from rentals.services import allocation_cancel

    allocation_cancel(acting=acting_as(bob), allocation=blocker)
    quote = alice_api.post(
        f"/api/v1/clusters/{lead.cluster_id}/extension-quotes/", {"period_count": 2},
        format="json",
    ).json()  # fmt: skip
    assert quote["node_count"] == 2 and quote["gpu_count"] == 16
    # extending through one node's endpoint extends the whole cluster
    response = alice_api.post(
        f"/api/v1/allocations/{members[1].pk}/extend/", {"quote": quote["id"]}, format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    )  # fmt: skip
    assert response.status_code == 200, response.content
    new_until = lead.paid_until + timedelta(days=2)
    assert {m.paid_until for m in Allocation.objects.filter(cluster=lead.cluster_id)} == {new_until}
    extension = LedgerEntry.objects.get(reason="extension")
    assert extension.allocation_id == lead.pk and extension.amount == Decimal(quote["total"])
    assert overlapping_pairs() == 0


def test_cluster_cancel_is_all_or_nothing(catalog, alice, alice_api):
    later = cluster_quote(alice, nodes=2, starts_at=None)
    running = allocation_book(acting=acting_as(alice), quote=later)
    refused = alice_api.post(f"/api/v1/clusters/{running.cluster_id}/cancel/")
    assert refused.status_code == 409
    assert set(Allocation.objects.values_list("state", flat=True)) == {AllocationState.RUNNING}

    from rentals.services import allocation_stop

    allocation_stop(acting=acting_as(alice), allocation=running)  # one node on its own
    assert alice_api.get(f"/api/v1/clusters/{running.cluster_id}/").json()["state"] == "mixed"


def test_a_scheduled_cluster_cancels_whole_and_refunds_its_charge(catalog, alice, alice_api):
    from django.utils import timezone

    quote = cluster_quote(alice, nodes=2, starts_at=timezone.now() + timedelta(days=2))
    lead = allocation_book(acting=acting_as(alice), quote=quote)
    other = Allocation.objects.filter(cluster=lead.cluster_id).exclude(pk=lead.pk).get()
    response = alice_api.post(f"/api/v1/allocations/{other.pk}/cancel/")
    assert response.status_code == 200, response.content
    assert set(Allocation.objects.values_list("state", flat=True)) == {AllocationState.CANCELLED}
    refund = LedgerEntry.objects.get(kind=LedgerKind.REFUND)
    assert (refund.allocation_id, refund.amount) == (lead.pk, quote.total)
    assert not Gpu.objects.filter(held__released=False).exists()
    # the nodes are free again for the same window
    assert allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))


def test_the_api_books_a_cluster_and_acts_on_it_whole(catalog, alice_api):
    quote = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "h100", "node_count": 2, "period": "day", "period_count": 1},
        format="json",
    )  # fmt: skip
    assert quote.status_code == 201, quote.content
    assert quote.json()["gpu_count"] == 16 and quote.json()["lines"][0]["count"] == 16
    booking = alice_api.post(
        "/api/v1/bookings/", {"quote": quote.json()["id"]}, format="json",
        HTTP_IDEMPOTENCY_KEY=key(),
    ).json()  # fmt: skip
    assert booking["cluster"] and len(booking["allocations"]) == 2
    assert booking["allocation"]["id"] == booking["allocations"][0]["id"] == booking["id"]
    assert {a["cluster"] for a in booking["allocations"]} == {booking["cluster"]}
    assert len({a["node"] for a in booking["allocations"]}) == 2
    url = f"/api/v1/clusters/{booking['cluster']}/"
    cluster = alice_api.get(url).json()
    assert (cluster["node_count"], cluster["gpu_count"], cluster["state"]) == (2, 16, "running")
    assert cluster["fabric"] == "InfiniBand NDR 400 Gb/s × 8"
    assert alice_api.post(url + "stop/").json()["state"] == "stopped"
    assert alice_api.post(url + "stop/").status_code == 409
    assert alice_api.post(url + "start/").json()["state"] == "running"
    for a in booking["allocations"]:
        assert [e["kind"] for e in alice_api.get(f"/api/v1/allocations/{a['id']}/").json()[
            "events"]] == ["booked", "stop", "start"]  # fmt: skip


def test_other_teams_and_staff_cannot_act_on_a_cluster(catalog, alice, bob_api, staff_api):
    lead = allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))
    url = f"/api/v1/clusters/{lead.cluster_id}/"
    assert bob_api.get(url).status_code == 404
    assert bob_api.post(url + "stop/").status_code == 404
    assert staff_api.get(url).status_code == 200
    assert staff_api.post(url + "stop/").status_code == 403
    assert set(Allocation.objects.values_list("state", flat=True)) == {AllocationState.RUNNING}


def test_the_first_whole_node_window_is_where_a_cluster_then_lands(catalog, alice, bob):
    from rentals.selectors.availability import start_windows

    blocker = book(bob, count=8, period="day")  # one of the two grouped 8-GPU nodes, today
    first = start_windows(
        gpu_model=catalog.h100, duration=timedelta(days=1), not_before=blocker.paid_from,
        node_count=2,
    )[0]  # fmt: skip
    assert first["starts_at"] == blocker.paid_until and first["region"] == "pl-waw"
    lead = allocation_book(
        acting=acting_as(alice), quote=cluster_quote(alice, nodes=2, starts_at=first["starts_at"])
    )
    nodes = set(
        Allocation.objects.filter(cluster=lead.cluster_id).values_list("node__hostname", flat=True)
    )
    assert nodes == set(first["nodes"])


def test_a_cluster_gets_one_expiry_warning_in_cluster_words(catalog, alice):
    from rentals.models import Notice, NoticeKind
    from rentals.services import expiry_notices_record
    from rentals.texts import notice_text

    lead = allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))
    assert expiry_notices_record(now=lead.paid_until - timedelta(minutes=30)) == 1
    notice = Notice.objects.get(kind=NoticeKind.EXPIRY_1H)
    assert "cluster of 2 × H100 SXM nodes (16 GPUs)" in notice_text(notice)
    members = Allocation.objects.filter(cluster=lead.cluster_id)
    assert all(m.warned_1h_at is not None for m in members)  # no second warning later
    assert expiry_notices_record(now=lead.paid_until - timedelta(minutes=20)) == 0


def test_a_clusters_charge_reads_every_gpu_on_the_statement_csv_and_api(catalog, alice, client):
    """The charge sits on one node's allocation: its words count every node's GPUs, as the
    quote and the receipt do (it read "8 × H100" for a 16-GPU cluster)."""
    allocation_book(acting=acting_as(alice), quote=cluster_quote(alice, nodes=2))
    words = "Cluster booking: 2 nodes × 8 H100 SXM (16 GPUs) for 1 day"
    client.force_login(alice)
    assert words in client.get("/statement/").content.decode()
    assert words in b"".join(client.get("/statement.csv").streaming_content).decode()
    api = client.get("/api/v1/ledger/").json()["results"]
    assert [row["description"] for row in api] == [words]


def _windows_asking_every_instant(
    gpu_model, *, duration, not_before, limit, gpu_count=1, node_count=None, region_id=None
):
    """The start windows as the rule states them: the request asked at `not_before` and at
    every later candidate instant in turn, none skipped."""
    params = availability._params(
        gpu_model=gpu_model, duration=duration, gpu_count=gpu_count, node_count=node_count,
        region_id=region_id, requires=availability.NO_REQUIRES,
    )  # fmt: skip
    rows = []
    with connection.cursor() as cursor:
        cursor.execute(capacity_sql.START_CANDIDATES, {**params, "not_before": not_before})
        for (t,) in cursor.fetchall():
            fitting = availability._fitting_at(cursor, t, params)
            rows += [(t, where, nodes, total) for where, _group, nodes, total in fitting]
    return [
        {"starts_at": t, "region": w, "nodes": list(n), "nodes_total": total, "as_of": None}
        for t, w, n, total in rows[:limit]
    ]


def _instants_asked(queries) -> int:
    """How many times the start windows asked whether the request fits (FITTING_AT, the one
    statement that reads hostnames)."""
    return sum(1 for q in queries.captured_queries if "hostname" in q["sql"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    bookings=st.lists(
        st.tuples(
            st.integers(0, 96),  # hours from now
            st.sampled_from([1, 4, 8]),
            st.sampled_from(["day", "week"]),
        ),
        max_size=12,
    ),
    ask=st.one_of(
        st.builds(lambda n: {"node_count": n}, st.integers(1, 3)),
        st.builds(lambda n: {"gpu_count": n}, st.sampled_from([1, 4, 6, 8])),
    ),
    days=st.sampled_from([1, 3, 7]),
    in_region=st.booleans(),
)
def test_start_windows_skip_only_instants_that_cannot_fit(db, alice, bookings, ask, days,
                                                          in_region):  # fmt: skip
    """The start windows, asking only instants inside a span that fits, are those of asking
    every candidate instant: whole nodes of groups of three and two, and GPUs on one node,
    on a fleet the bookings fill."""
    with transaction.atomic():
        shaped = catalog_setup(h100_nodes=((8, 8, 8), (8, 8), (4,)))
        now = db_now()
        for hours, count, period in bookings:
            with contextlib.suppress(NoCapacity):
                book(alice, count=count, period=period,
                     starts_at=now + timedelta(hours=hours) if hours else None)  # fmt: skip
        region_id = shaped.nodes[0].region_id if in_region else None
        asked = {"duration": timedelta(days=days), "not_before": now, "region_id": region_id,
                 **ask}  # fmt: skip
        expected = _windows_asking_every_instant(shaped.h100, limit=4, **asked)
        with CaptureQueriesContext(connection) as queries:
            assert start_windows(gpu_model=shaped.h100, limit=4, **asked) == expected
        # Not fitting at `not_before`, it is asked there and then only at instants it fits.
        if not expected or expected[0]["starts_at"] != now:
            assert _instants_asked(queries) == 1 + len({w["starts_at"] for w in expected})
        transaction.set_rollback(True)


def test_a_cluster_that_fits_only_later_is_not_asked_at_every_instant_before(catalog, alice, bob):
    """The group's two nodes are held for a day and a week, and four holdings elsewhere end
    in between: the first window is the week's end, read without asking those instants."""
    day = book(bob, count=8, period="day")
    week = book(bob, count=8, period="week")
    assert {day.node_id, week.node_id} == {n.pk for n in catalog.nodes[:2]}
    for hours in range(1, 5):
        book(alice, count=1, period="day", starts_at=day.paid_from + timedelta(hours=hours))
    with CaptureQueriesContext(connection) as queries:
        windows = start_windows(
            gpu_model=catalog.h100, duration=timedelta(days=1), not_before=day.paid_from,
            node_count=2, limit=1,
        )  # fmt: skip
    assert [w["starts_at"] for w in windows] == [week.paid_until]
    assert _instants_asked(queries) == 2  # now, and the week's end: not the five between
    three = start_windows(
        gpu_model=catalog.h100, duration=timedelta(days=1), not_before=day.paid_from,
        node_count=3,
    )  # fmt: skip
    assert three == []  # a group of three whole nodes: none


def test_gpus_that_fit_only_later_are_not_asked_at_every_instant_before(catalog, alice, bob):
    """Both 8-GPU nodes held (for two days and a week) and the 4-GPU node's GPUs one by one
    for a day from staggered starts: eight GPUs fit first when the two days end, read
    without asking the four instants before."""
    two_days = book(bob, count=8, period="day", periods=2)
    book(bob, count=8, period="week")
    start = two_days.paid_from
    for hours in range(4):
        book(
            alice,
            count=1,
            period="day",
            starts_at=start + timedelta(hours=hours) if hours else None,
        )
    with CaptureQueriesContext(connection) as queries:
        windows = start_windows(
            gpu_model=catalog.h100, duration=timedelta(days=1), not_before=start, gpu_count=8,
            limit=1,
        )  # fmt: skip
    assert [w["starts_at"] for w in windows] == [two_days.paid_until]
    assert _instants_asked(queries) == 2


def test_instants_between_two_spans_that_fit_are_not_asked(catalog, alice, bob):
    """Eight GPUs fit for a day at the end of node A's first day (A is booked again a day
    after), then not until node B's week ends; the three instants between are not asked."""
    start = db_now()
    first = book(bob, count=8, period="day")
    week = book(bob, count=8, period="week")
    again = book(bob, count=8, period="week", starts_at=first.paid_until + timedelta(days=1))
    assert again.node_id == first.node_id != week.node_id
    for hours in (25, 26, 27):  # on the 4-GPU node, each ending within the gap
        book(alice, count=1, period="day", starts_at=start + timedelta(hours=hours))
    with CaptureQueriesContext(connection) as queries:
        windows = start_windows(
            gpu_model=catalog.h100, duration=timedelta(days=1), not_before=start, gpu_count=8,
            limit=2,
        )  # fmt: skip
    assert [w["starts_at"] for w in windows] == [first.paid_until, week.paid_until]
    assert _instants_asked(queries) == 3
