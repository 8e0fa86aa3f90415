"""Node agents: their credentials and what they last were served and applied.

A credential is shown once and only its SHA-256 is kept; issuing a new one for a node
replaces the old (rotation), revoking leaves the node with none. An agent authenticates
with `Authorization: Agent <credential>` and sees its own node's state only.
"""

import hashlib
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.db.models import Q
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from rest_framework import authentication, exceptions, permissions

from catalog.models import Node, NodeState
from core.authentication import authorization_credential
from core.db import db_now
from telemetry.flags import FlagKey, flags_sync
from telemetry.models import FlagKind, NodeAgent
from telemetry.poll import console_watching_since

PREFIX = "agpn_"  # AnchorGPU node
INVALID_CREDENTIAL = gettext_lazy("Invalid agent credential.")


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@transaction.atomic
def agent_credential_issue(*, node: Node, by=None) -> str:
    """A new credential for the node's agent (the old one stops working), returned once."""
    secret = PREFIX + secrets.token_urlsafe(32)
    agent, _created = NodeAgent.objects.select_for_update().get_or_create(node=node)
    agent.key_hash, agent.hint = _hash(secret), secret[:10]
    agent.issued_at, agent.issued_by, agent.revoked_at = db_now(), by, None
    agent.save(update_fields=["key_hash", "hint", "issued_at", "issued_by", "revoked_at"])
    return secret


@transaction.atomic
def agent_credential_revoke(*, node: Node) -> bool:
    return bool(
        NodeAgent.objects.filter(node=node, key_hash__isnull=False).update(
            key_hash=None, revoked_at=db_now()
        )
    )


SEEN_EVERY = timedelta(seconds=20)  # how stale last_seen_at may get between writes


def agent_state_served(*, agent_id: int, generation: str, state: dict, at: datetime) -> None:
    """Remember what the node was given (once per generation: most polls change nothing)."""
    NodeAgent.objects.filter(pk=agent_id).update(
        served_generation=generation, served_state=state, served_at=at, last_seen_at=at
    )


def credential_hash(request) -> str | None:
    """The hash of the `Authorization: Agent <credential>` a request sends (None: no such
    header); a malformed one is refused."""
    secret = authorization_credential(
        request, AgentAuthentication.keyword, invalid=INVALID_CREDENTIAL
    )
    return None if secret is None else _hash(secret)


@transaction.atomic
def agent_report_record(
    *, agent: NodeAgent, generation: str, errors: list, version: str, at: datetime, applied
) -> tuple[dict | None, dict | None]:
    """What the node says it applied: (the applied state before, the one now).

    `applied(before, served)` tells what the node really has now (the caller decides what
    a report means). A report of a generation the node was not last served is kept as a
    sign of life, not as applied: the node will fetch the newer one."""
    locked = NodeAgent.objects.select_for_update().get(pk=agent.pk)
    before = locked.applied_state
    locked.last_seen_at, locked.errors, locked.agent_version = at, errors, version[:40]
    fields = ["last_seen_at", "errors", "agent_version"]
    if generation == locked.served_generation and locked.served_state is not None:
        locked.applied_generation = generation
        locked.applied_state = applied(before, locked.served_state)
        locked.applied_at = at
        fields += ["applied_generation", "applied_state", "applied_at"]
    locked.save(update_fields=fields)
    return before, locked.applied_state


def agent_silent_after() -> timedelta:
    return timedelta(seconds=settings.ANCHORGPU["AGENT_SILENT_SECONDS"])


@transaction.atomic
def agents_flag_silent(*, now: datetime | None = None) -> int:
    """A flag on each node whose agent (one with a live credential) has not asked for its
    state lately, or never since its credential was issued; closed when it asks again.
    Judged only once the console has been up (polling, `console_watching_since`) for that
    long: agents unheard while the console itself was down or starting are not silent."""
    now = now or db_now()
    cutoff = now - agent_silent_after()
    watching = console_watching_since(now=now)
    if watching is None or watching > cutoff:
        return 0
    silent: dict[FlagKey, str] = {
        (agent.node_id, None, FlagKind.AGENT_SILENT): (
            _("the node's agent last asked for its state at %(at)s UTC")
            % {"at": f"{agent.last_seen_at:%Y-%m-%d %H:%M:%S}"}
            if agent.last_seen_at
            else _("the node's agent has not asked for its state since its credential was issued")
        )
        for agent in NodeAgent.objects.filter(
            key_hash__isnull=False, node__state=NodeState.ACTIVE
        ).filter(Q(last_seen_at__lt=cutoff) | Q(last_seen_at__isnull=True, issued_at__lt=cutoff))
    }
    flags_sync(
        silent, decided=Q(kind=FlagKind.AGENT_SILENT), now=now, kinds=(FlagKind.AGENT_SILENT,)
    )
    return len(silent)


class AgentAuthentication(authentication.BaseAuthentication):
    """`Authorization: Agent <credential>`: the request acts as that node's agent."""

    keyword = "Agent"

    def authenticate(self, request):
        key_hash = credential_hash(request)
        if key_hash is None:
            return None
        agent = (
            NodeAgent.objects.select_related("node")
            .filter(key_hash=key_hash, revoked_at__isnull=True)
            .first()
        )
        if agent is None:
            raise invalid_credential()
        return AnonymousUser(), agent

    def authenticate_header(self, request):
        return self.keyword


def invalid_credential() -> exceptions.AuthenticationFailed:
    return exceptions.AuthenticationFailed(_("Invalid or revoked agent credential."))


class IsNodeAgent(permissions.BasePermission):
    def has_permission(self, request, view):
        return isinstance(request.auth, NodeAgent)
