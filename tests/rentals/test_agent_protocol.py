"""The node agent protocol: a node's credential sees its own desired state only; an
unchanged state answers 304; a report moves each allocation's access from pending to
ready, and from revoking to revoked, with the events, the notice and the webhook."""

import hashlib
import uuid
from datetime import timedelta

import pytest
from allauth.mfa.totp.internal.auth import TOTP, generate_totp_secret
from django.contrib.auth.models import Permission
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Membership
from accounts.roles import acting_as
from accounts.services.ssh_keys import ssh_key_add
from accounts.services.tokens import api_token_create
from catalog.models import Node
from rentals.access import agent_poll, tenant_login
from rentals.models import AllocationEvent, EventKind, Notice, NoticeKind
from rentals.services import allocation_keys_set, allocation_start, allocation_stop
from telemetry.agents import agent_credential_issue, agents_flag_silent
from telemetry.models import Flag, FlagKind, NodeAgent
from tests.support.booking import book
from tests.support.factories.accounts import team_with
from tests.support.oracles import node_desired_state
from tests.support.ssh import ed25519_key, public_line
from tests.telemetry.conftest import watching

pytestmark = pytest.mark.django_db


def _agent(node) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Agent {agent_credential_issue(node=node)}")
    return client


def _booked_with_key(alice, **kwargs):
    key = ssh_key_add(user=alice, public_key=public_line(ed25519_key()))
    allocation = book(alice, model="h100", count=2, period="day", **kwargs)
    allocation_keys_set(acting=acting_as(alice), allocation=allocation, ssh_key_ids=[key.pk])
    return allocation, key


def _access(api, allocation):
    return api.get(f"/api/v1/allocations/{allocation.pk}/").json()["access"]


def _report(agent, state, applied=None, errors=()):
    ids = [e["id"] for e in state["allocations"]] if applied is None else applied
    body = {"generation": state["generation"], "applied": ids, "errors": list(errors)}
    return agent.post("/api/v1/agent/report/", body, format="json")


def test_the_state_lists_the_nodes_allocations_and_an_unchanged_one_is_a_304(catalog, alice):
    allocation, key = _booked_with_key(alice)
    agent = _agent(allocation.node)
    first = agent.get("/api/v1/agent/state/")
    assert first.status_code == 200 and first["ETag"] == f'"{first.json()["generation"]}"'
    (entry,) = first.json()["allocations"]
    assert entry["id"] == str(allocation.pk) and entry["login"] == tenant_login(allocation.pk)
    assert entry["granted"] is True and entry["keys"] == [key.public_key]
    assert [g["index"] for g in entry["gpus"]] == [g.gpu.index for g in allocation.held.all()]
    again = agent.get("/api/v1/agent/state/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304 and again["ETag"] == first["ETag"]


def test_a_node_sees_its_own_state_only_and_a_bad_credential_nothing(catalog, alice):
    allocation, _key = _booked_with_key(alice)
    other = Node.objects.exclude(pk=allocation.node_id).first()
    assert _agent(other).get("/api/v1/agent/state/").json()["allocations"] == []
    stranger = APIClient(HTTP_AUTHORIZATION="Agent agpn_not-a-credential")
    refused = stranger.get("/api/v1/agent/state/")
    assert refused.status_code == 401 and refused["Content-Type"] == "application/problem+json"
    assert APIClient().get("/api/v1/agent/state/").status_code in (401, 403)


def test_access_is_pending_until_the_node_applies_it_then_ready(catalog, alice, alice_api):
    allocation, _key = _booked_with_key(alice)
    assert _access(alice_api, allocation)["state"] == "pending"
    agent = _agent(allocation.node)
    state = agent.get("/api/v1/agent/state/").json()
    assert _report(agent, state).status_code == 204
    access = _access(alice_api, allocation)
    assert access["state"] == "ready" and access["username"] == tenant_login(allocation.pk)
    assert access["ssh_command"] == f"ssh {access['username']}@{allocation.node.hostname}"
    assert (
        AllocationEvent.objects.filter(allocation=allocation, kind=EventKind.ACCESS_GRANTED).count()
        == 1
    )
    ready = Notice.objects.get(allocation=allocation, kind=NoticeKind.ACCESS_READY)
    assert ready.user == alice

    allocation_stop(acting=acting_as(alice), allocation=allocation)
    assert _access(alice_api, allocation)["state"] == "revoking"
    stopped = agent.get("/api/v1/agent/state/").json()
    assert stopped["allocations"][0]["granted"] is False and stopped["allocations"][0]["keys"] == []
    _report(agent, stopped)
    assert _access(alice_api, allocation)["state"] == "revoked"
    assert AllocationEvent.objects.filter(
        allocation=allocation, kind=EventKind.ACCESS_REVOKED
    ).exists()

    allocation_start(acting=acting_as(alice), allocation=allocation)
    _report(agent, agent.get("/api/v1/agent/state/").json())
    assert _access(alice_api, allocation)["state"] == "ready"
    assert Notice.objects.filter(kind=NoticeKind.ACCESS_READY).count() == 1  # once per period


def test_a_failed_allocation_stays_pending_with_the_agents_words(catalog, alice, alice_api):
    allocation, _key = _booked_with_key(alice)
    agent = _agent(allocation.node)
    state = agent.get("/api/v1/agent/state/").json()
    _report(agent, state, applied=[], errors=[{"allocation": str(allocation.pk),
                                                "detail": "useradd: disk full"}])  # fmt: skip
    access = _access(alice_api, allocation)
    assert access["state"] == "pending" and access["detail"] == "useradd: disk full"
    assert not Notice.objects.filter(kind=NoticeKind.ACCESS_READY).exists()


def test_a_report_of_a_state_never_served_changes_nothing(catalog, alice, alice_api):
    allocation, _key = _booked_with_key(alice)
    agent = _agent(allocation.node)
    agent.get("/api/v1/agent/state/")
    forged = {"generation": "f" * 32, "allocations": [{"id": str(allocation.pk)}]}
    assert _report(agent, forged).status_code == 204
    assert _access(alice_api, allocation)["state"] == "pending"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"generation": "x", "applied": ["not-a-uuid"]},
        {"generation": "x", "applied": [], "errors": [{"allocation": str(uuid.uuid4())}]},
        {"generation": "x" * 65, "applied": []},
    ],
    ids=["empty", "bad-id", "error-without-words", "long-generation"],
)
def test_a_malformed_report_is_a_field_error(catalog, alice, body):
    allocation, _key = _booked_with_key(alice)
    response = _agent(allocation.node).post("/api/v1/agent/report/", body, format="json")
    assert response.status_code == 400 and response.json()["errors"]


def test_a_member_removed_from_the_team_loses_their_keys_on_its_nodes(catalog, alice, bob):
    team = team_with(alice, {bob: "member"})
    bobs = ssh_key_add(user=bob, public_key=public_line(ed25519_key()))
    allocation = book(bob, model="h100", count=1, period="day", team=team)
    allocation_keys_set(acting=acting_as(bob, team), allocation=allocation, ssh_key_ids=[bobs.pk])
    agent = _agent(allocation.node)
    assert agent.get("/api/v1/agent/state/").json()["allocations"][0]["keys"] == [bobs.public_key]
    Membership.objects.filter(team=team, user=bob).delete()
    assert agent.get("/api/v1/agent/state/").json()["allocations"][0]["keys"] == []


def test_a_team_that_requires_two_factor_lets_in_no_key_of_a_member_without_one(
    catalog, alice, bob
):
    team = team_with(alice, {bob: "member"})
    bobs = ssh_key_add(user=bob, public_key=public_line(ed25519_key()))
    allocation = book(bob, model="h100", count=1, period="day", team=team)
    allocation_keys_set(acting=acting_as(bob, team), allocation=allocation, ssh_key_ids=[bobs.pk])
    agent = _agent(allocation.node)
    first = agent.get("/api/v1/agent/state/").json()
    assert first["allocations"][0]["keys"] == [bobs.public_key]
    team.require_second_factor = True  # as the owner sets it (tests/accounts)
    team.save(update_fields=["require_second_factor"])
    stricter = agent.get("/api/v1/agent/state/", HTTP_IF_NONE_MATCH=f'"{first["generation"]}"')
    assert stricter.status_code == 200 and stricter.json()["allocations"][0]["keys"] == []
    orm = node_desired_state(node=allocation.node, now=timezone.now())
    assert orm["allocations"][0]["keys"] == []  # the ORM reads the same
    TOTP.activate(bob, generate_totp_secret())
    assert agent.get("/api/v1/agent/state/").json()["allocations"][0]["keys"] == [bobs.public_key]


def test_staff_who_may_change_nodes_issue_rotate_and_revoke_a_nodes_credential(
    catalog, staff, staff_api, alice_api
):
    node = Node.objects.first()
    url = f"/api/v1/nodes/{node.hostname}/agent-credential/"
    assert alice_api.post(url).status_code == 403
    # Read-only staff: a new credential would cut the node's running agent off.
    assert staff_api.post(url).status_code == 403 and staff_api.delete(url).status_code == 403
    assert not NodeAgent.objects.filter(node=node).exists()
    staff.user_permissions.add(Permission.objects.get(codename="change_node"))
    staff_api.force_authenticate(type(staff).objects.get(pk=staff.pk))  # its permissions anew
    first = staff_api.post(url).json()["credential"]
    second = staff_api.post(url).json()["credential"]
    assert (
        APIClient(HTTP_AUTHORIZATION=f"Agent {first}").get("/api/v1/agent/state/").status_code
        == 401
    )
    live = APIClient(HTTP_AUTHORIZATION=f"Agent {second}")
    assert live.get("/api/v1/agent/state/").status_code == 200
    listed = next(
        n
        for n in staff_api.get("/api/v1/nodes/").json()["results"]
        if n["hostname"] == node.hostname
    )
    assert listed["agent"]["credential"] == second[:10] + "…" and listed["agent"]["last_seen_at"]
    assert staff_api.delete(url).status_code == 204
    assert live.get("/api/v1/agent/state/").status_code == 401


def test_a_silent_agent_gets_a_flag_that_closes_when_it_asks_again(catalog, alice, staff):
    node = Node.objects.first()
    agent = _agent(node)
    agent.get("/api/v1/agent/state/")
    assert agents_flag_silent() == 0
    later = timezone.now() + timedelta(minutes=5)
    watching(since=later - timedelta(minutes=10), now=later)  # the console has been up
    assert agents_flag_silent(now=later) == 1
    flag = Flag.objects.get(kind=FlagKind.AGENT_SILENT, closed_at__isnull=True)
    assert flag.node == node and "last asked for its state" in flag.detail
    NodeAgent.objects.filter(node=node).update(last_seen_at=later)
    agents_flag_silent(now=later)
    assert Flag.objects.get(pk=flag.pk).closed_at == later


def test_metrics_count_agents_by_freshness(catalog, staff):
    node = Node.objects.first()
    _agent(node).get("/api/v1/agent/state/")
    agent_credential_issue(node=Node.objects.exclude(pk=node.pk).first())  # never asked
    api = APIClient(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=staff, name='m')}")
    text = api.get("/metrics").content.decode()
    active = Node.objects.filter(state="active").count()
    assert 'anchorgpu_node_agents{freshness="fresh"} 1.0' in text
    assert 'anchorgpu_node_agents{freshness="silent"} 1.0' in text
    assert f'anchorgpu_node_agents{{freshness="none"}} {active - 2}.0' in text


def test_the_agents_one_statement_poll_reads_what_the_orm_reads(catalog, alice, bob):
    """The poll's SQL and the ORM build the same state: running, stopped and soon-starting
    allocations, members' keys in, a removed member's out."""
    team = team_with(alice, {bob: "member"})
    keys = [ssh_key_add(user=u, public_key=public_line(ed25519_key())) for u in (alice, bob)]
    # the booking let in alice's key; bob adds his own (and keeps hers)
    node = Node.objects.filter(gpu_model=catalog.h100).order_by("hostname").first()
    Node.objects.filter(gpu_model=catalog.h100).exclude(pk=node.pk).update(state="maintenance")
    running = book(alice, model="h100", count=1, period="day", team=team)
    stopped = book(alice, model="h100", count=1, period="day", team=team)
    soon = book(alice, model="h100", count=1, period="day", team=team,
                starts_at=timezone.now() + timedelta(minutes=3))  # fmt: skip
    later = book(alice, model="h100", count=1, period="day", team=team,
                 starts_at=timezone.now() + timedelta(hours=3))  # fmt: skip
    for allocation in (running, stopped, soon, later):
        allocation_keys_set(acting=acting_as(bob, team), allocation=allocation,
                            ssh_key_ids=[k.pk for k in keys])  # fmt: skip
    allocation_stop(acting=acting_as(alice, team), allocation=stopped)
    Membership.objects.filter(team=team, user=bob).delete()
    secret = agent_credential_issue(node=node)
    polled = agent_poll(key_hash=hashlib.sha256(secret.encode()).hexdigest())
    assert polled.state == node_desired_state(node=node, now=polled.now)
    listed = {e["id"]: e for e in polled.state["allocations"]}
    assert set(listed) == {str(running.pk), str(stopped.pk), str(soon.pk)}
    assert listed[str(running.pk)]["keys"] == [keys[0].public_key]  # bob's went with him
    assert listed[str(stopped.pk)]["keys"] == [] and not listed[str(stopped.pk)]["granted"]


def test_the_report_carries_the_nodes_software_stack_and_staff_see_it(catalog, alice, staff):
    allocation, _key = _booked_with_key(alice)
    agent = _agent(allocation.node)
    state = agent.get("/api/v1/agent/state/").json()
    body = {"generation": state["generation"], "applied": [], "errors": [],
            "software": {"vendor": "nvidia", "driver": "570.124.06", "cuda": "12.8",
                         "os": "Ubuntu 24.04.2 LTS", "kernel": "6.8.0-51-generic",
                         "gpus": [{"index": 0, "name": "NVIDIA H100", "compute_cap": "9.0"}]}}  # fmt: skip
    assert agent.post("/api/v1/agent/report/", body, format="json").status_code == 204
    node = Node.objects.get(pk=allocation.node_id)
    assert (node.driver_version, node.cuda_version, node.cuda_key) == (
        "570.124.06",
        "12.8",
        [12, 8],
    )
    assert node.software["os"] == "Ubuntu 24.04.2 LTS"
    # a report without `software` (an older agent) leaves the stack as it was
    assert _report(agent, state, applied=[]).status_code == 204
    assert Node.objects.get(pk=node.pk).cuda_version == "12.8"
    bad = {**body, "software": {"gpus": "many"}}
    assert agent.post("/api/v1/agent/report/", bad, format="json").status_code == 400
