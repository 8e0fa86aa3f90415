"""A console that was stopped judges no node, agent or allocation by the time it was not
watching: after a restart nothing is impaired, stale or silent before the
polls since the restart say so; a recovery has its notice and webhook as the impairment
had; and a span shorter than IMPAIRED_MIN_SECONDS is not impaired time."""

import json
from datetime import timedelta

import pytest
from django.core import mail

from accounts.roles import acting_as
from catalog.models import Node, NodeHealth
from core.db import db_now
from rentals.errors import NotImpaired
from rentals.models import Allocation, ImpairedSpan, Notice, NoticeKind
from rentals.selectors.allocations import impaired_allocations
from rentals.services import notice_send
from rentals.services.credits import credit_note_build
from rentals.services.impairments import allocations_impairment_sync
from rentals.texts import notice_subject, notice_text
from telemetry.agents import agent_credential_issue, agents_flag_silent
from telemetry.models import Flag, FlagKind, NodeAgent
from telemetry.poll import nodes_mark_stale, poll_nodes
from telemetry.simulator import Simulator
from tests.support.booking import book
from tests.telemetry.conftest import point_at
from webhooks.services import endpoint_create

pytestmark = pytest.mark.django_db

INTERVAL = timedelta(seconds=15)


@pytest.fixture
def simulator():
    state = {"nodes": {}}
    sim = Simulator(lambda: state["nodes"], refresh=0.0).start_in_thread()
    sim.state = state
    yield sim
    sim.stop()


def _h100(catalog):
    return [n for n in catalog.nodes if n.gpu_model_id == catalog.h100.pk]


def _round(nodes, at):
    """One round as beat and the workers run it: the polls, then the judges."""
    poll_nodes([n.pk for n in nodes], now=at)
    nodes_mark_stale(now=at)
    agents_flag_silent(now=at)
    return allocations_impairment_sync(now=at)


def _hook(alice, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "WEBHOOK_ALLOW_PRIVATE_URLS": True}
    endpoint, _secret = endpoint_create(
        acting=acting_as(alice), url="http://127.0.0.1:9/hook",
        events=["allocation.impaired", "allocation.recovered"],
    )  # fmt: skip
    return endpoint


def test_a_restart_after_an_hour_s_stop_marks_nothing_before_the_polls_say_so(
    catalog, alice, simulator, settings
):
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100(catalog)
    point_at(simulator, nodes)
    for node in nodes:
        agent_credential_issue(node=node)
    restart = db_now()
    stopped = restart - timedelta(hours=1)
    for k in range(8, -1, -1):  # two minutes of good rounds, then the console stopped
        _round(nodes, stopped - k * INTERVAL)
    NodeAgent.objects.update(last_seen_at=stopped)

    # The console starts again: beat's first round judges before any poll is stored.
    nodes_mark_stale(now=restart)
    agents_flag_silent(now=restart)
    done = allocations_impairment_sync(now=restart)

    assert (
        done["impaired"] == [] and Allocation.objects.get(pk=allocation.pk).impaired_since is None
    )
    assert not Node.objects.filter(health=NodeHealth.STALE).exists()
    assert not Flag.objects.filter(kind=FlagKind.AGENT_SILENT).exists()
    assert not Notice.objects.filter(kind=NoticeKind.IMPAIRED).exists()

    # Its node really is down now: unreachable at once, impaired only after
    # IMPAIRED_NODE_AFTER of polls since the restart, never from the hour before.
    simulator.set_fault(allocation.node.hostname, "reset")
    at = restart + timedelta(seconds=2)
    first = _round(nodes, at)
    assert first["impaired"] == []
    assert Node.objects.get(pk=allocation.node_id).health == NodeHealth.UNREACHABLE
    after = settings.ANCHORGPU["IMPAIRED_NODE_AFTER"]
    while Allocation.objects.get(pk=allocation.pk).impaired_since is None:
        at += INTERVAL
        assert at <= restart + after + 3 * INTERVAL, "never marked"
        _round(nodes, at)
    assert Allocation.objects.get(pk=allocation.pk).impaired_since >= restart + after
    # The agents that ask again after the restart are not silent either.
    NodeAgent.objects.update(last_seen_at=at)
    assert agents_flag_silent(now=at) == 0


def test_a_console_gap_neither_marks_nor_clears_a_node_s_impairment(catalog, alice, simulator):
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100(catalog)
    point_at(simulator, nodes)
    now = db_now()
    simulator.set_fault(allocation.node.hostname, "reset")
    at = now
    while Allocation.objects.get(pk=allocation.pk).impaired_since is None:
        _round(nodes, at)
        at += INTERVAL
    span = ImpairedSpan.objects.get(allocation=allocation)

    # The console stops for an hour; at its start, before a poll, the node is unknown.
    done = allocations_impairment_sync(now=at + timedelta(hours=1))

    assert done["recovered"] == [] and allocation.pk in done["still"]
    assert ImpairedSpan.objects.get(pk=span.pk).ended_at is None
    assert not Notice.objects.filter(kind=NoticeKind.RECOVERED).exists()


def test_a_recovery_sends_a_notice_and_a_webhook_as_the_impairment_did(
    catalog, alice, simulator, settings
):
    endpoint = _hook(alice, settings)
    allocation = book(alice, model="h100", count=2, period="week")
    nodes = _h100(catalog)
    point_at(simulator, nodes)
    gone = allocation.current_holdings[0].gpu
    now = db_now()
    _round(nodes, now)
    simulator.set_fault(allocation.node.hostname, "gpu-gone", gpu=gone.index)
    assert _round(nodes, now + INTERVAL)["impaired"] == [allocation.pk]
    simulator.set_fault(allocation.node.hostname, "ok")
    back = now + INTERVAL + timedelta(minutes=10)

    assert _round(nodes, back)["recovered"] == [allocation.pk]

    recovered = Notice.objects.get(allocation=allocation, kind=NoticeKind.RECOVERED)
    span = ImpairedSpan.objects.get(allocation=allocation)
    assert recovered.impaired_span_id == span.pk and span.ended_at == back
    assert notice_send(notice_id=recovered.pk)
    message = mail.outbox[-1]
    assert message.subject.endswith(notice_subject(recovered))
    assert "work again since" in message.body and "We credit the impaired time" in message.body
    sent = [d.event_type for d in endpoint.deliveries.order_by("id")]
    assert sent == ["allocation.impaired", "allocation.recovered"]
    payload = json.loads(endpoint.deliveries.order_by("id").last().payload)
    assert payload["data"]["allocation"]["impaired_since"] is None


def test_a_span_shorter_than_the_minimum_is_not_impaired_time(
    catalog, alice, staff, client, settings
):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "IMPAIRED_MIN": timedelta(minutes=5)}
    booked_at = db_now() - timedelta(hours=5)
    blip = book(alice, model="h100", count=1, period="week", now=booked_at)
    real = book(alice, model="h100", count=1, period="week", now=booked_at)
    start = blip.paid_from + timedelta(hours=1)
    for allocation, length in (
        (blip, timedelta(minutes=4, seconds=59)),
        (real, timedelta(minutes=5)),
    ):
        ImpairedSpan.objects.create(
            allocation=allocation, started_at=start, ended_at=start + length,
            gpus=[allocation.current_holdings[0].gpu_id],
        )  # fmt: skip

    assert [a.pk for a in impaired_allocations()] == [real.pk]  # staff's remedies page
    with pytest.raises(NotImpaired):
        credit_note_build(allocation=Allocation.objects.get(pk=blip.pk))
    assert credit_note_build(allocation=Allocation.objects.get(pk=real.pk)).net > 0
    client.force_login(staff)
    page = client.get("/usage/?days=1").content.decode().replace("\xa0", " ")
    # 5 minutes: 0.08 GPU-hours (with the blip's 4:59 it would read 0.2)
    assert 'id="impaired-hours"><div class="value">0.1<' in page
    client.force_login(alice)
    assert "credit-pending" not in client.get(f"/allocations/{blip.pk}/").content.decode()
    assert "credit-pending" in client.get(f"/allocations/{real.pk}/").content.decode()

    span = ImpairedSpan.objects.get(allocation=blip)
    notice = Notice.objects.create(
        user=alice, allocation=blip, kind=NoticeKind.RECOVERED, impaired_span=span,
        ends_at=blip.paid_until, created_at=span.ended_at,
    )  # fmt: skip
    assert "less than 5 minutes, which is not counted as impaired time" in notice_text(notice)
