"""Access writes: the keys an allocation lets in, and what a node's agent reports it did.

A report is judged against the state the node was served: the allocations it applied take
their entry from that state; one that failed (or was not named) keeps what it had. Each
change of what the node really grants is an event (access granted, access revoked), and the
first grant of a paid period a notice and a webhook (`allocation.access_ready`).
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from accounts.errors import NotAllowed
from accounts.models import SshKey
from accounts.roles import Acting, Action
from catalog.services import node_software_record
from core.db import db_now
from core.errors import Invalid
from rentals.models import (
    LIVE_STATES,
    Allocation,
    AllocationKey,
    EventKind,
    Notice,
    NoticeKind,
)
from rentals.services.events import events_record
from rentals.services.notices import notices_queue
from telemetry.agents import agent_report_record
from telemetry.models import NodeAgent

MAX_KEYS = 20  # per allocation

# A node's desired or applied access state, as the agent reads and reports it (JSON).
AccessState = dict[str, Any]


def keys_for_booking(*, acting: Acting, ssh_key_ids: list[int] | None) -> list[SshKey]:
    """The keys a booking lets in: the booker's chosen ones, or all the booker's keys."""
    keys = SshKey.objects.filter(user=acting.user)
    if ssh_key_ids is None:
        return list(keys[:MAX_KEYS])
    chosen = list(keys.filter(pk__in=set(ssh_key_ids)))
    missing = set(ssh_key_ids) - {k.pk for k in chosen}
    if missing:
        raise Invalid(
            {"ssh_keys": [_("Not one of your SSH keys: %(ids)s.") % {"ids": _ids(missing)}]}
        )
    if len(chosen) > MAX_KEYS:
        raise Invalid({"ssh_keys": [_("At most %(n)s keys per allocation.") % {"n": MAX_KEYS}]})
    return chosen


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids))


def allocation_keys_attach(*, allocations: list[Allocation], keys: list[SshKey]) -> None:
    """Inside a booking's transaction: its allocations let these keys in."""
    AllocationKey.objects.bulk_create(
        AllocationKey(allocation=allocation, ssh_key=key)
        for allocation in allocations
        for key in keys
    )


@transaction.atomic
def allocation_keys_set(
    *, acting: Acting, allocation: Allocation, ssh_key_ids: list[int]
) -> Allocation:
    """The keys a live allocation lets in (a cluster's: every node's): the acting person's
    own keys, and any of those already chosen (a colleague's key stays or goes, it is not
    added by someone else). The node adds or removes them at its next look."""
    acting.require(Action.ACT)
    scope = Q(cluster_id=allocation.cluster_id) if allocation.cluster_id else Q(pk=allocation.pk)
    members = list(Allocation.objects.select_for_update().filter(scope).order_by("pk"))
    if not members or members[0].team_id != acting.team.pk:
        raise NotAllowed(_("Only the team that holds an allocation can change it."))
    if any(m.state not in LIVE_STATES for m in members):
        raise Invalid({"ssh_keys": [_("The allocation has ended; its keys can no longer change.")]})
    wanted = set(ssh_key_ids)
    if len(wanted) > MAX_KEYS:
        raise Invalid({"ssh_keys": [_("At most %(n)s keys per allocation.") % {"n": MAX_KEYS}]})
    chosen = set(
        AllocationKey.objects.filter(allocation__in=members).values_list("ssh_key_id", flat=True)
    )
    own = set(SshKey.objects.filter(user=acting.user, pk__in=wanted).values_list("pk", flat=True))
    unknown = wanted - own - chosen
    if unknown:
        raise Invalid(
            {"ssh_keys": [_("Not one of your SSH keys: %(ids)s.") % {"ids": _ids(unknown)}]}
        )
    if wanted == chosen:
        return allocation
    AllocationKey.objects.filter(allocation__in=members).exclude(ssh_key_id__in=wanted).delete()
    allocation_keys_attach(
        allocations=members, keys=list(SshKey.objects.filter(pk__in=wanted - chosen))
    )
    added, removed = len(wanted - chosen), len(chosen - wanted)
    events_record(
        members,
        kind=EventKind.KEYS,
        actor=acting.user,
        note=f"+{added} −{removed}",
        at=db_now(),
    )
    return allocation


def _merged(
    before: AccessState | None, served: AccessState, applied_ids: set[str], failed: set[str]
) -> AccessState:
    """What the node now really has: the served entries it applied, and for the rest (failed
    or not named) what it had before."""
    had = {e["id"]: e for e in (before or {}).get("allocations", [])}
    entries: dict[str, dict[str, Any]] = {}
    for entry in served.get("allocations", []):
        if entry["id"] in applied_ids and entry["id"] not in failed:
            entries[entry["id"]] = entry
        elif entry["id"] in had:
            entries[entry["id"]] = had[entry["id"]]
    served_ids = {e["id"] for e in served.get("allocations", [])}
    for allocation_id, entry in had.items():  # gone from the state, but not yet wiped
        if allocation_id not in served_ids and allocation_id in failed:
            entries[allocation_id] = entry
    return {**served, "allocations": sorted(entries.values(), key=lambda e: e["id"])}


@transaction.atomic
def access_report(
    *,
    agent: NodeAgent,
    generation: str,
    applied: list[object],
    errors: list[dict[str, Any]],
    version: str = "",
    software: dict[str, Any] | None = None,
) -> None:
    """A node's agent says what it applied of the state it was served (and, where it
    sends one, the node's software stack)."""
    now = db_now()
    if software is not None:
        node_software_record(node_id=agent.node_id, report=software, at=now)
    applied_ids = {str(a) for a in applied}
    failed = {str(e["allocation"]) for e in errors if e.get("allocation")}
    stored = [
        {"allocation": str(e["allocation"]) if e.get("allocation") else None,
         "detail": str(e.get("detail", ""))[:500]}
        for e in errors
    ]  # fmt: skip
    before, after = agent_report_record(
        agent=agent,
        generation=generation,
        errors=stored,
        version=version,
        at=now,
        applied=lambda before, served: _merged(before, served, applied_ids, failed),
    )
    _announce_changes(before, after, now)


def _granted(state: AccessState | None) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in (state or {}).get("allocations", []) if e["granted"]}


def _announce_changes(before: AccessState | None, after: AccessState | None, now: datetime) -> None:
    was, now_granted = _granted(before), _granted(after)
    granted = [i for i in now_granted if i not in was]
    revoked = [i for i in was if i not in now_granted]
    by_id = {
        str(a.pk): a
        for a in Allocation.objects.filter(pk__in=granted + revoked).select_related("user")
    }
    for kind, ids in ((EventKind.ACCESS_GRANTED, granted), (EventKind.ACCESS_REVOKED, revoked)):
        allocations = [by_id[i] for i in ids if i in by_id]
        if allocations:
            events_record(allocations, kind=kind, at=now)
    # Once per paid period: starting again after a stop says nothing new. Reports of one
    # node are serialised (agent_report_record locks its row), and an allocation is on one.
    told = set(
        Notice.objects.filter(allocation_id__in=granted, kind=NoticeKind.ACCESS_READY).values_list(
            "allocation_id", "ends_at"
        )
    )
    ready = [a for i in granted if (a := by_id.get(i)) and (a.pk, a.paid_until) not in told]
    notices = Notice.objects.bulk_create(
        Notice(user=a.user, allocation=a, kind=NoticeKind.ACCESS_READY,
               ends_at=a.paid_until, created_at=now)
        for a in ready
    )  # fmt: skip
    mailed = [n.pk for n, a in zip(notices, ready, strict=True) if a.user.email]
    transaction.on_commit(lambda: notices_queue(mailed))
