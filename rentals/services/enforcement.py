"""Enforcement by time: start what is due, expire what has ended."""

import logging
from datetime import datetime

from django.db import connection, transaction

from rentals.models import LIVE_STATES, AllocationEvent, AllocationState, EventKind
from rentals.signals import allocation_events_recorded

logger = logging.getLogger(__name__)


_ENFORCE_SQL = """
WITH moved AS (
    UPDATE rentals_allocation AS a SET state = %(to)s
    FROM (
        SELECT id, state FROM rentals_allocation
        WHERE state = ANY(%(from)s) AND {condition}
        FOR UPDATE SKIP LOCKED
    ) AS old
    WHERE a.id = old.id
    RETURNING a.id, old.state AS from_state
)
INSERT INTO rentals_allocationevent (allocation_id, at, kind, from_state, to_state, note)
SELECT id, %(now)s, %(kind)s, from_state, %(to)s, '' FROM moved
ORDER BY id
RETURNING id
"""


def allocations_enforce(*, now: datetime | None = None) -> dict:
    """Start what is due, expire what has ended: one conditional statement per transition.

    It compares times (the database clock unless `now` is given), never counts ticks, so
    one run after a long outage catches up; a second overlapping run finds nothing to do.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if now is None:
            cursor.execute("SELECT now()")
            now = cursor.fetchone()[0]
        cursor.execute(
            _ENFORCE_SQL.format(condition="paid_until <= %(now)s"),
            {
                "to": AllocationState.EXPIRED,
                "from": list(LIVE_STATES),
                "now": now,
                "kind": EventKind.EXPIRE,
            },
        )
        expired_events = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            _ENFORCE_SQL.format(condition="paid_from <= %(now)s AND paid_until > %(now)s"),
            {
                "to": AllocationState.RUNNING,
                "from": [AllocationState.SCHEDULED],
                "now": now,
                "kind": EventKind.START,
            },
        )
        started_events = [row[0] for row in cursor.fetchall()]
        if expired_events or started_events:
            allocation_events_recorded.send(
                sender=AllocationEvent, event_ids=expired_events + started_events
            )
    started, expired = len(started_events), len(expired_events)
    if started or expired:
        logger.info("enforcement: %s started, %s expired", started, expired)
    return {"started": started, "expired": expired}
