"""Enforcement by time: start what is due, expire what has ended."""

import logging
from datetime import datetime

from django.db import connection, transaction

from core.db import db_now
from rentals.models import LIVE_STATES, AllocationEvent, AllocationState, EventKind
from rentals.signals import allocation_events_recorded
from rentals.sql import booking as booking_sql

logger = logging.getLogger(__name__)


@transaction.atomic
def allocations_enforce(*, now: datetime | None = None) -> dict[str, int]:
    """Start what is due, expire what has ended: one conditional statement per transition.

    It compares times (the database's clock unless `now` is given), never counts ticks, so
    one run after a long outage catches up; a second overlapping run finds nothing to do.
    """
    with connection.cursor() as cursor:
        if now is None:
            now = db_now()
        cursor.execute(
            booking_sql.ENFORCE_EXPIRE,
            {
                "to": AllocationState.EXPIRED,
                "from": list(LIVE_STATES),
                "now": now,
                "kind": EventKind.EXPIRE,
            },
        )
        expired_events = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            booking_sql.ENFORCE_START,
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
