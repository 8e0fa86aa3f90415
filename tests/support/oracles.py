"""Test oracles: the same answer as production's one-statement reads, from the ORM, written
plainly so a test can hold the fast path to it."""

from datetime import datetime

from django.db.models import Q

from catalog.models import Node
from rentals.access import _ACCESS_FACTS, SCHEDULED_LEAD, _node_state, desired_entry
from rentals.models import LIVE_STATES, Allocation, AllocationState


def _on_node_now(node: Node, now: datetime):
    return Allocation.objects.filter(node=node, state__in=LIVE_STATES, paid_until__gt=now).filter(
        ~Q(state=AllocationState.SCHEDULED) | Q(paid_from__lte=now + SCHEDULED_LEAD)
    )


def node_desired_state(*, node: Node, now: datetime) -> dict:
    """The node's desired state with its generation (the digest of the rest), from the ORM
    (the agent's own poll reads the same in one statement: `agent_poll`)."""
    entries = [desired_entry(a) for a in _on_node_now(node, now).prefetch_related(*_ACCESS_FACTS)]
    return _node_state(node.hostname, node.exporter, entries)
