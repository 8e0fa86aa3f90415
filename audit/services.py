"""The audit log's one write of its own: retention. Every other row is written by the
tracked tables' triggers."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from audit import sql
from audit.models import EVENT_MODELS
from core.db import db_now


@transaction.atomic
def audit_prune(*, now: datetime | None = None) -> int:
    """Delete the events older than AUDIT_RETENTION_DAYS; how many went. The cutoff is
    declared to the database for this transaction only, and the tables' trigger refuses
    the deletion of any row at or after it (and any DELETE that declares none)."""
    now = now or db_now()
    before = now - timedelta(days=settings.ANCHORGPU["AUDIT_RETENTION_DAYS"])
    deleted = 0
    with connection.cursor() as cursor:
        cursor.execute(sql.DELETE_BEFORE, {"before": before.isoformat()})
        for model in EVENT_MODELS:
            cursor.execute(sql.delete_older_than(model._meta.db_table), {"before": before})
            deleted += cursor.rowcount
    return deleted
