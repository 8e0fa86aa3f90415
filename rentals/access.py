"""Access to what was sold: each allocation's tenant on its node, as the node's agent is to
make it (the desired state) and as the agent last said it made it (the applied state).

A node's desired state lists every allocation that holds GPUs on it now or starts within
`SCHEDULED_LEAD`: its tenant login, its GPUs, whether access is granted (running only) and
the keys of its team's members that were chosen for it. Its generation is the digest of
its contents, so any change by any path (a stop, an expiry, a key deleted, a member
removed) is a new generation, and an unchanged state is the same one (the ETag).

An allocation's access is judged from both: `ready` once the node applied exactly what
the allocation now needs, `pending` until then; `revoking` then `revoked` after a stop, an
expiry or a cancel; `scheduled` before its start.
"""

import copy
import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, cast

from allauth.mfa.models import Authenticator
from django.db import connection
from django.db.models import Exists, F, OuterRef, Prefetch, Q, prefetch_related_objects

from accounts.models import SshKey
from catalog.models import ExporterKind, Node
from nodeagent import TENANT_PREFIX
from rentals.models import LIVE_STATES, Allocation, AllocationGpu, AllocationKey, AllocationState
from rentals.sql import agent as agent_sql
from telemetry.agents import SEEN_EVERY
from telemetry.models import NodeAgent

SCHEDULED_LEAD = timedelta(minutes=5)  # a scheduled tenant's account is made this early


class AccessFacts(TypedDict):
    """What an allocation's access is judged from: `_ACCESS_FACTS` prefetches them (a
    booking attaches the same, rentals.services.bookings)."""

    live_gpus: list[AllocationGpu]
    member_keys: list[AllocationKey]


if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    WithAccessFacts = WithAnnotations[Allocation, AccessFacts]


class AccessState:
    SCHEDULED = "scheduled"
    PENDING = "pending"
    READY = "ready"
    REVOKING = "revoking"
    REVOKED = "revoked"


def tenant_login(allocation_id) -> str:
    """The allocation's account on its node: the same on every read, so an agent that
    crashed recognises what it made."""
    return f"{TENANT_PREFIX}{allocation_id.hex[:10]}"


def gpu_variable(exporter: str) -> str:
    return "ROCR_VISIBLE_DEVICES" if exporter == ExporterKind.AMD else "CUDA_VISIBLE_DEVICES"


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def _keys_of_members():
    """An allocation's chosen keys whose owners are still in its team: a removed member's
    keys stop working with the membership, and in a team that requires two-factor sign-in,
    those of a member without a second factor stop until they set one up."""
    second_factor = Authenticator.objects.filter(
        user=OuterRef("ssh_key__user"), type=Authenticator.Type.TOTP
    )
    return (
        AllocationKey.objects.filter(ssh_key__user__memberships__team_id=F("allocation__team_id"))
        .filter(Q(allocation__team__require_second_factor=False) | Exists(second_factor))
        .select_related("ssh_key")
    )


_ACCESS_FACTS = (
    Prefetch(
        "held",  # the GPUs it holds now: a swap ended the others' holdings
        AllocationGpu.objects.filter(released=False, ends_at=F("allocation__paid_until"))
        .select_related("gpu"),
        to_attr="live_gpus",
    ),
    Prefetch("keys", _keys_of_members(), to_attr="member_keys"),
)  # fmt: skip


def entry(*, allocation_id, state, paid_from, paid_until, gpus, keys, vcpus_per_gpu,
          ram_gib_per_gpu) -> dict:  # fmt: skip
    """What the node should make of one allocation: the one definition, whether its facts
    came from the ORM (`desired_entry`) or from the agent's poll (`AGENT_POLL`). Its CPU
    and memory share is counted on the GPUs it holds now."""
    granted = state == AllocationState.RUNNING
    return {
        "id": str(allocation_id),
        "login": tenant_login(allocation_id),
        "state": state,
        "granted": granted,
        "paid_from": _iso(paid_from),
        "paid_until": _iso(paid_until),
        "gpus": [{"index": index, "uuid": uuid} for index, uuid in sorted(gpus)],
        "keys": sorted(set(keys)) if granted else [],
        "cpus": vcpus_per_gpu * len(gpus),
        "memory_mib": ram_gib_per_gpu * 1024 * len(gpus),
    }


def desired_entry(allocation: "WithAccessFacts") -> dict:
    """An allocation's entry from the ORM (its `_ACCESS_FACTS` prefetched)."""
    return entry(
        allocation_id=allocation.pk,
        state=allocation.state,
        paid_from=allocation.paid_from,
        paid_until=allocation.paid_until,
        gpus=[(h.gpu.index, h.gpu.uuid) for h in allocation.live_gpus],
        keys=[k.ssh_key.public_key for k in allocation.member_keys],
        vcpus_per_gpu=allocation.vcpus_per_gpu,
        ram_gib_per_gpu=allocation.ram_gib_per_gpu,
    )


def _node_state(hostname: str, exporter: str, entries: list[dict]) -> dict:
    return state_with_generation(
        {
            "node": hostname,
            "vendor": "amd" if exporter == ExporterKind.AMD else "nvidia",
            "gpu_variable": gpu_variable(exporter),
            "allocations": sorted(entries, key=lambda e: e["id"]),
        }
    )


@dataclass(frozen=True)
class AgentPoll:
    agent_id: int
    served_generation: str
    now: datetime
    state: dict


def agent_poll(*, key_hash: str) -> AgentPoll | None:
    """What a poll with this credential (its hash) gets: its node's desired state, read in
    one statement with the credential's check and the agent's last sign of life; None for
    a credential that is not (or no longer) a node's."""
    with connection.cursor() as cursor:
        params: dict[str, Any] = {  # the stubs' parameter types leave out timedelta
            "key_hash": key_hash, "seen_every": SEEN_EVERY, "live": list(LIVE_STATES),
            "scheduled": AllocationState.SCHEDULED, "lead": SCHEDULED_LEAD,
            "totp": Authenticator.Type.TOTP,
        }  # fmt: skip
        cursor.execute(agent_sql.AGENT_POLL, params)
        row = cursor.fetchone()
    if row is None:
        return None
    agent_id, served, now, _node_id, hostname, exporter, allocations, _seen = row
    entries = [
        entry(allocation_id=uuid.UUID(str(pk)), state=state, paid_from=_when(start),
              paid_until=_when(end), gpus=[tuple(g) for g in gpus], keys=keys,
              vcpus_per_gpu=vcpus, ram_gib_per_gpu=gib)
        for pk, state, start, end, gpus, keys, vcpus, gib in allocations
    ]  # fmt: skip
    return AgentPoll(agent_id, served, now, _node_state(hostname, exporter, entries))


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


def state_with_generation(body: dict) -> dict:
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    return {"generation": digest.hexdigest()[:32], **body}


def _applied_entries(agent: NodeAgent | None) -> dict[str, dict]:
    state = agent.applied_state if agent else None
    return {e["id"]: e for e in (state or {}).get("allocations", [])}


def _failed(agent: NodeAgent | None) -> dict[str, str]:
    errors = agent.errors if agent else []
    return {e["allocation"]: e.get("detail", "") for e in errors if e.get("allocation")}


def access_of(allocations: list[Allocation]) -> dict:
    """{allocation id: access} for allocations (of any nodes, their nodes loaded): their
    state as judged from what each node's agent applied, and how to connect. At most three
    queries for any number (one where the GPUs and keys came with them: a booking's)."""
    bare = [copy.copy(a) for a in allocations if not hasattr(a, "member_keys")]
    prefetch_related_objects(bare, *_ACCESS_FACTS)  # on copies: the callers' stay as they were
    by_id = {a.pk: a for a in allocations} | {a.pk: a for a in bare}
    nodes = {a.node_id for a in allocations}
    agents = {a.node_id: a for a in NodeAgent.objects.filter(node_id__in=nodes)}
    out = {}
    for allocation in allocations:
        loaded = cast("WithAccessFacts", by_id[allocation.pk])  # each has its facts now
        agent = agents.get(allocation.node_id)
        applied = _applied_entries(agent).get(str(allocation.pk))
        detail = _failed(agent).get(str(allocation.pk), "")
        desired = desired_entry(loaded)
        out[allocation.pk] = {
            "state": _state(loaded, desired, applied, detail),
            "detail": detail,
            **connection_details(allocation.node, tenant_login(allocation.pk)),
            "keys": [k.ssh_key.fingerprint for k in loaded.member_keys],
            "agent_seen_at": agent.last_seen_at if agent else None,
        }
    return out


def _state(allocation, desired, applied, detail) -> str:
    if allocation.state == AllocationState.SCHEDULED:
        return AccessState.SCHEDULED
    if allocation.state == AllocationState.RUNNING:
        return AccessState.READY if applied == desired and not detail else AccessState.PENDING
    if allocation.state == AllocationState.STOPPED:
        return AccessState.REVOKING if applied and applied["granted"] else AccessState.REVOKED
    return AccessState.REVOKING if applied else AccessState.REVOKED


def connection_details(node: Node, login: str) -> dict:
    host, port = node.ssh_host or node.hostname, node.ssh_port
    command = f"ssh {login}@{host}" if port == 22 else f"ssh -p {port} {login}@{host}"
    return {"host": host, "port": port, "username": login, "ssh_command": command}


def key_choices(*, acting, allocation: Allocation) -> list[dict]:
    """The keys the acting person may choose for an allocation: their own, and any already
    chosen (a colleague's stays or goes, nobody adds it), each marked whether chosen."""
    chosen = {
        k.ssh_key_id: k.ssh_key for k in allocation.keys.select_related("ssh_key", "ssh_key__user")
    }
    own = {k.pk: k for k in SshKey.objects.filter(user=acting.user)}
    keys = {**own, **chosen}
    return [
        {"key": key, "chosen": pk in chosen, "mine": key.user_id == acting.user.pk}
        for pk, key in sorted(keys.items())
    ]
