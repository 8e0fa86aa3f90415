"""Impaired allocations, driven by the simulator's faults: a GPU gone from its exporter or a
node that answers nothing marks the allocation within two polling intervals (a notice, a
webhook, the API and the page say so); a replacement swaps the GPUs under the exclusion
constraint with the same paid period; a credit pays the impaired time back exactly, once."""

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from rest_framework.test import APIClient

from accounts.roles import acting_as
from accounts.services.profile import account_preferences_set
from catalog.models import Node, NodeState
from core.db import db_now
from rentals.models import (
    Allocation,
    AllocationEvent,
    EventKind,
    ImpairedSpan,
    Notice,
    NoticeKind,
)
from rentals.services import notice_send
from rentals.services.impairments import allocations_impairment_sync, impairment_shards
from rentals.tasks import allocations_impairment_sync_task
from rentals.texts import notice_subject, notice_text, reader_preferences
from telemetry.models import Flag, FlagKind
from telemetry.poll import poll_nodes
from telemetry.simulator import Simulator
from tests.support.booking import book
from tests.support.operators import operator
from tests.support.races import overlapping_pairs
from tests.telemetry.conftest import point_at
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def simulator():
    state = {"nodes": {}}
    sim = Simulator(lambda: state["nodes"], refresh=0.0).start_in_thread()
    sim.state = state
    yield sim
    sim.stop()


@pytest.fixture
def ops_api(db):
    client = APIClient()
    client.force_authenticate(operator())
    return client


def _h100_nodes(catalog):
    return [n for n in catalog.nodes if n.gpu_model_id == catalog.h100.pk]


def _poll_and_sync(nodes, now):
    poll_nodes([n.pk for n in nodes], now=now)
    return allocations_impairment_sync(now=now)


def _hook(alice, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    endpoint, _secret = endpoint_create(
        acting=acting_as(alice), url="http://127.0.0.1:9/hook",
        events=["allocation.impaired", "allocation.recovered", "allocation.moved"],
    )  # fmt: skip
    return endpoint


def _sent(endpoint):
    return [(d.event_type, json.loads(d.payload)) for d in endpoint.deliveries.order_by("id")]


def test_a_gone_gpu_marks_the_allocation_then_a_replacement_swaps_it_with_the_same_period(
    catalog, alice, alice_api, ops_api, simulator, settings, client
):
    endpoint = _hook(alice, settings)
    account_preferences_set(user=alice, language="pl", time_zone="Europe/Warsaw")
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100_nodes(catalog)
    point_at(simulator, nodes)
    interval = timedelta(seconds=settings.ANCHORGPU["POLL_INTERVAL"])
    now = db_now()
    assert _poll_and_sync(nodes, now)["impaired"] == []
    held = sorted(allocation.current_holdings, key=lambda h: h.gpu.index)
    gone = held[1].gpu

    simulator.set_fault(allocation.node.hostname, "gpu-gone", gpu=gone.index)
    polls = 0
    while polls < 2 and Allocation.objects.get(pk=allocation.pk).impaired_since is None:
        polls += 1
        _poll_and_sync(nodes, now + polls * interval)
    marked = Allocation.objects.get(pk=allocation.pk)
    assert marked.impaired_since == now + polls * interval  # within two polling intervals
    assert (marked.paid_from, marked.paid_until) == (allocation.paid_from, allocation.paid_until)
    assert Flag.objects.filter(gpu=gone, kind=FlagKind.GPU_MISSING, closed_at=None).exists()
    span = ImpairedSpan.objects.get(allocation=allocation)
    assert (span.gpus, span.ended_at, span.cause) == ([gone.pk], None, "gpu")

    notice = Notice.objects.get(allocation=allocation, kind=NoticeKind.IMPAIRED)
    with reader_preferences(alice):
        assert "nie mogą pracować" in notice_subject(notice)
        assert "1 z 2 GPU H100 SXM" in notice_text(notice)
    assert notice_send(notice_id=notice.pk)
    assert mail.outbox[-1].subject == "Niektóre GPU Twojej alokacji AnchorGPU nie mogą pracować"
    assert "(usterka po naszej stronie)" in mail.outbox[-1].body
    sent = _sent(endpoint)
    assert [t for t, _ in sent] == ["allocation.impaired"]
    assert sent[0][1]["data"]["allocation"]["impaired_since"] is not None
    assert sent[0][1]["data"]["impaired"] == [{"uuid": gone.uuid, "index": gone.index}]
    read = alice_api.get(f"/api/v1/allocations/{allocation.pk}/").json()
    assert read["impaired_since"] is not None
    client.force_login(alice)
    page = client.get(f"/allocations/{allocation.pk}/").content.decode()
    assert 'data-impaired="' in page

    # Another sync while it is still gone changes nothing.
    _poll_and_sync(nodes, now + 3 * interval)
    assert ImpairedSpan.objects.filter(allocation=allocation).count() == 1
    assert alice_api.post(f"/api/v1/allocations/{allocation.pk}/replace/").status_code == 403

    swapped = ops_api.post(f"/api/v1/allocations/{allocation.pk}/replace/")
    assert swapped.status_code == 200, swapped.content
    body = swapped.json()
    assert body["id"] == str(allocation.pk) and body["impaired_since"] is None
    assert body["paid_until"] == read["paid_until"] and body["paid_from"] == read["paid_from"]
    uuids = {g["uuid"] for g in body["gpus"]}
    assert len(uuids) == 2 and gone.uuid not in uuids and held[0].gpu.uuid in uuids
    assert overlapping_pairs() == 0
    assert {e["kind"] for e in body["events"]} >= {"impaired", "replace", "recovered"}
    kinds = AllocationEvent.objects.filter(allocation=allocation).order_by("id")
    assert list(kinds.values_list("kind", flat=True))[-3:] == [
        EventKind.IMPAIRED, EventKind.REPLACE, EventKind.RECOVERED
    ]  # fmt: skip
    replace = AllocationEvent.objects.get(allocation=allocation, kind=EventKind.REPLACE)
    assert f"#{gone.index} →" in replace.note
    span.refresh_from_db()
    assert span.ended_at is not None
    assert [t for t, _ in _sent(endpoint)] == [
        "allocation.impaired", "allocation.moved", "allocation.recovered"
    ]  # fmt: skip
    # The old GPU's holding ended at the swap; the new one runs to paid_until.
    after = Allocation.objects.get(pk=allocation.pk)
    old = after.held.get(gpu=gone)
    assert old.ends_at < after.paid_until and after.paid_until == allocation.paid_until

    again = ops_api.post(f"/api/v1/allocations/{allocation.pk}/replace/")
    assert (again.status_code, again.json()["code"]) == (409, "not_impaired")


def test_a_node_that_answers_nothing_for_too_long_marks_its_allocations(
    catalog, alice, simulator, settings
):
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100_nodes(catalog)
    point_at(simulator, nodes)
    interval = timedelta(seconds=settings.ANCHORGPU["POLL_INTERVAL"])
    after = settings.ANCHORGPU["IMPAIRED_NODE_AFTER"]
    now = db_now()
    _poll_and_sync(nodes, now)
    simulator.set_fault(allocation.node.hostname, "reset")
    assert _poll_and_sync(nodes, now + interval)["impaired"] == []  # not for long yet
    late = now + after
    at = now + interval
    while (
        at < late + 2 * interval and Allocation.objects.get(pk=allocation.pk).impaired_since is None
    ):
        at += interval  # polled every interval, answering nothing
        _poll_and_sync(nodes, at)
    marked = Allocation.objects.get(pk=allocation.pk)
    assert marked.impaired_since is not None and late <= marked.impaired_since <= late + interval
    assert at <= late + interval
    span = ImpairedSpan.objects.get(allocation=allocation)
    assert (len(span.gpus), span.cause) == (2, "node")

    simulator.set_fault(allocation.node.hostname, "ok")
    done = _poll_and_sync(nodes, at + interval)
    assert done["recovered"] == [allocation.pk]
    span.refresh_from_db()
    assert span.ended_at == at + interval
    assert Allocation.objects.get(pk=allocation.pk).impaired_since is None
    assert list(
        AllocationEvent.objects.filter(
            allocation=allocation, kind__in=[EventKind.IMPAIRED, EventKind.RECOVERED]
        ).values_list("kind", flat=True)
    ) == [EventKind.IMPAIRED, EventKind.RECOVERED]


def test_the_policy_replaces_at_once_when_a_spare_exists(catalog, alice, simulator, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "IMPAIRED_AUTO_REPLACE": True}
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100_nodes(catalog)
    point_at(simulator, nodes)
    now = db_now()
    _poll_and_sync(nodes, now)
    gone = allocation.current_holdings[0].gpu
    simulator.set_fault(allocation.node.hostname, "gpu-gone", gpu=gone.index)
    done = _poll_and_sync(nodes, now + timedelta(seconds=15))
    assert done["impaired"] == [allocation.pk] and done["replaced"] == [allocation.pk]
    after = Allocation.objects.get(pk=allocation.pk)
    assert after.impaired_since is None
    assert gone.pk not in {h.gpu_id for h in after.current_holdings}
    assert len(after.current_holdings) == 2 and overlapping_pairs() == 0


def _impaired_by_hand(allocation, *, hours_ago=5, ended=False):
    """A span as the sync leaves it (the page's and the metrics' tests need no simulator)."""
    now = db_now()
    span = ImpairedSpan.objects.create(
        allocation=allocation, started_at=now - timedelta(hours=hours_ago),
        ended_at=now - timedelta(hours=1) if ended else None,
        gpus=[allocation.current_holdings[0].gpu_id],
    )  # fmt: skip
    if not ended:
        Allocation.objects.filter(pk=allocation.pk).update(impaired_since=span.started_at)
    return span


def test_staff_see_impaired_allocations_and_issue_a_credit_from_their_page(catalog, alice, client):
    allocation = book(alice, model="h100", count=2, period="week")
    span = ImpairedSpan.objects.create(
        allocation=allocation, started_at=allocation.paid_from + timedelta(hours=1),
        ended_at=allocation.paid_from + timedelta(hours=4),
        gpus=[allocation.current_holdings[0].gpu_id],
    )  # fmt: skip
    client.force_login(alice)
    assert client.get("/impaired/").status_code == 302  # staff only
    client.force_login(operator())
    page = client.get("/impaired/").content.decode().replace("\xa0", " ")
    assert f'id="impaired-{allocation.pk}"' in page and 'href="/impaired/"' in page
    assert "credit-button" in page and "Total: 7.97 USD" in page  # 3 h × 2.16, + 23 % VAT
    issued = client.post(f"/impaired/{allocation.pk}/credit/", follow=True)
    assert "Credit issued" in issued.content.decode()
    assert span.credits.count() == 1
    assert f'id="impaired-{allocation.pk}"' not in client.get("/impaired/").content.decode()
    refused = client.post(f"/impaired/{allocation.pk}/credit/", follow=True).content.decode()
    assert "already credited" in refused and span.credits.count() == 1


def test_metrics_and_the_dashboard_count_impaired_allocations(
    catalog, alice, staff, client, settings
):
    from prometheus_client.parser import text_string_to_metric_families

    allocation = book(alice, model="h100", count=2, period="week")
    _impaired_by_hand(allocation, hours_ago=2)
    settings.ANCHORGPU = {**settings.ANCHORGPU, "METRICS_TOKEN": "s3cret-for-prometheus"}
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-for-prometheus")
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(text.content.decode())
        for s in f.samples
    }
    assert values["anchorgpu_allocations_impaired"] == 1
    assert values["anchorgpu_impaired_gpus"] == 1
    assert values["anchorgpu_impaired_spans_uncredited"] == 0
    from rentals.services.credits import credit_note_issue

    ended = book(alice, model="h100", count=1, period="week")
    ImpairedSpan.objects.create(
        allocation=ended, started_at=ended.paid_from, gpus=[ended.current_holdings[0].gpu_id],
        ended_at=ended.paid_from + timedelta(minutes=30),
    )  # fmt: skip
    credit_note_issue(operator=operator(), allocation_id=ended.pk)
    client.force_login(staff)
    page = client.get("/usage/?days=1").content.decode().replace("\xa0", " ")
    assert 'id="impaired-hours"><div class="value">2' in page
    assert "Credited for impaired time: 1.08 USD" in page  # half an hour × 2.16 (revenue: net)


def test_the_new_gpus_telemetry_joins_the_charts_and_summary_from_the_swap_on(catalog, alice):
    from rentals.selectors.allocation_usage import allocation_series, allocation_usage
    from rentals.services.impairments import allocation_replace
    from telemetry.models import GpuSample, Severity

    allocation = book(alice, model="h100", count=2, period="week")
    start = allocation.paid_from
    old = allocation.current_holdings[0].gpu
    Flag.objects.create(
        node=old.node, gpu=old, kind=FlagKind.GPU_MISSING, severity=Severity.CRITICAL,
        opened_at=start, last_seen_at=start,
    )  # fmt: skip
    allocations_impairment_sync(now=start + timedelta(milliseconds=1))
    swap = start + timedelta(milliseconds=2)
    allocation_replace(operator=operator(), allocation_id=allocation.pk, now=swap)
    after = Allocation.objects.get(pk=allocation.pk)
    new = next(
        h.gpu for h in after.current_holdings if h.gpu_id not in {old.pk} and h.starts_at == swap
    )
    tick = timedelta(microseconds=500)
    for gpu, at in ((old, swap - tick), (old, swap + tick), (new, swap - tick), (new, swap + tick)):
        GpuSample.objects.create(gpu=gpu, at=at, utilization=90.0)
    series = allocation_series(allocation=after, start=start)
    points = {g["uuid"]: [p["t"] for p in g["points"]] for g in series["gpus"]}
    assert points[old.uuid] == [(swap - tick).isoformat()]
    assert points[new.uuid] == [(swap + tick).isoformat()]
    now = db_now()
    usage = allocation_usage(allocation=after, now=now)
    # Two GPUs for the whole time so far: the old one until the swap, the new one after it.
    assert usage["gpu_hours"] == round(2 * (now - start).total_seconds() / 3600, 2)


def test_the_admin_replaces_through_the_same_service(catalog, alice, client):
    from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
    from django.contrib.auth.models import Permission

    from telemetry.models import Severity

    allocation = book(alice, model="h100", count=2, period="week")
    old = allocation.current_holdings[0].gpu
    now = db_now()
    Flag.objects.create(
        node=old.node, gpu=old, kind=FlagKind.GPU_MISSING, severity=Severity.CRITICAL,
        opened_at=now, last_seen_at=now,
    )  # fmt: skip
    allocations_impairment_sync()
    ops = operator()
    ops.user_permissions.add(*Permission.objects.filter(codename="view_allocation"))
    client.force_login(ops)
    form = {"action": "replace_selected", ACTION_CHECKBOX_NAME: [str(allocation.pk)]}
    answer = client.post("/admin/rentals/allocation/", form, follow=True)
    assert "1 allocations replaced." in answer.content.decode()
    after = Allocation.objects.get(pk=allocation.pk)
    assert after.impaired_since is None and old.pk not in {h.gpu_id for h in after.current_holdings}
    assert overlapping_pairs() == 0


def test_an_allocation_that_ends_while_impaired_closes_its_span_without_a_recovery(catalog, alice):
    from rentals.services import allocations_enforce
    from telemetry.models import Severity
    from tests.support.booking import end_paid_periods_a_minute_ago

    allocation = book(alice, model="h100", count=1, period="day")
    gpu = allocation.current_holdings[0].gpu
    now = db_now()
    Flag.objects.create(
        node=gpu.node, gpu=gpu, kind=FlagKind.RAS, severity=Severity.CRITICAL,
        opened_at=now, last_seen_at=now,
    )  # fmt: skip
    assert allocations_impairment_sync()["impaired"] == [allocation.pk]
    with connection.cursor() as cursor:  # the deferred checks first: the helper alters a table
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    end_paid_periods_a_minute_ago()
    allocations_enforce()
    done = allocations_impairment_sync()
    assert done["recovered"] == [] and done["impaired"] == []
    after = Allocation.objects.get(pk=allocation.pk)
    assert (after.state, after.impaired_since) == ("expired", None)
    assert ImpairedSpan.objects.get(allocation=allocation).ended_at is not None
    assert not after.events.filter(kind=EventKind.RECOVERED).exists()


def test_the_impaired_page_has_a_pinned_query_count(catalog, alice, bob, client):
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    def impaired(user, model):
        allocation = book(user, model=model, count=1, period="week")
        ImpairedSpan.objects.create(
            allocation=allocation, started_at=allocation.paid_from + timedelta(hours=1),
            ended_at=allocation.paid_from + timedelta(hours=2),
            gpus=[allocation.current_holdings[0].gpu_id],
        )  # fmt: skip

    client.force_login(operator())
    impaired(alice, "h100")

    def queries():
        with CaptureQueriesContext(conn) as ctx:
            assert client.get("/impaired/").status_code == 200
        return len(ctx.captured_queries)

    queries()  # the first request warms the session and caches
    first = queries()
    impaired(bob, "l4")
    impaired(alice, "mi300x")
    assert queries() == first


def test_a_cluster_members_node_down_is_replaced_by_a_whole_node_of_its_group(
    catalog, alice, ops_api, simulator, settings
):
    from rentals.services import allocation_book, quote_create

    acting = acting_as(alice)
    quote = quote_create(
        acting=acting, gpu_model="h100", node_count=1, period="day", period_count=1
    )
    allocation = allocation_book(acting=acting, quote=quote)
    assert allocation.cluster_id and allocation.node.network_group == "ib-1"
    nodes = _h100_nodes(catalog)
    point_at(simulator, nodes)
    _poll_and_sync(nodes, db_now())
    # The timing rule has its own test above: here a silent node counts at once, so the
    # replacement (on the real clock) sees what the sync saw.
    settings.ANCHORGPU = {**settings.ANCHORGPU, "IMPAIRED_NODE_AFTER": timedelta(0)}
    simulator.set_fault(allocation.node.hostname, "reset")
    assert _poll_and_sync(nodes, db_now())["impaired"] == [allocation.pk]

    swapped = ops_api.post(f"/api/v1/allocations/{allocation.pk}/replace/")
    assert swapped.status_code == 200, swapped.content
    body = swapped.json()
    other = next(n for n in nodes if n.network_group == "ib-1" and n.pk != allocation.node_id)
    assert body["node"] == other.hostname and len(body["gpus"]) == 8
    assert body["paid_until"].replace("Z", "+00:00") == allocation.paid_until.isoformat()
    assert body["impaired_since"] is None and overlapping_pairs() == 0


def test_the_sync_takes_a_shard_of_nodes_at_a_time_and_the_shards_cover_every_mark(
    catalog, alice, simulator, settings
):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "POLL_SHARD_SIZE": 1}
    first = book(alice, model="h100", count=8, period="week")
    second = book(alice, model="h100", count=8, period="week")
    assert first.node_id != second.node_id
    nodes = _h100_nodes(catalog)
    point_at(simulator, nodes)
    for allocation in (first, second):
        simulator.set_fault(allocation.node.hostname, "gpu-gone", gpu=0)
    now = db_now()
    poll_nodes([n.pk for n in nodes], now=now)
    active = Node.objects.filter(state=NodeState.ACTIVE).order_by("pk").values_list("pk", flat=True)
    assert impairment_shards() == [[pk] for pk in active]

    assert allocations_impairment_sync(now=now, nodes=[first.node_id])["impaired"] == [first.pk]
    assert Allocation.objects.get(pk=second.pk).impaired_since is None  # another shard's
    assert allocations_impairment_sync(now=now, nodes=[second.node_id])["impaired"] == [second.pk]
    assert allocations_impairment_sync(now=now, nodes=[first.node_id])["still"] == [first.pk]

    # A marked allocation on a node no longer active stays in a shard, so its mark can clear.
    Node.objects.filter(pk=second.node_id).update(state=NodeState.MAINTENANCE)
    shards = impairment_shards()
    assert [second.node_id] in shards and len(shards) == len(active)
    # The task queues one shard task a shard.
    assert allocations_impairment_sync_task() == {"shards": len(shards)}
