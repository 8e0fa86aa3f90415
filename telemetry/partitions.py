"""Raw samples live in a table partitioned by day (`telemetry_gpusample_YYYYMMDD`), so that
retention drops whole days instead of deleting hundreds of millions of rows, and reads of
a time range touch only its days.

Partitions are created ahead by a beat task (`sample_partitions_ensure`). A default
partition catches rows no day partition takes (the task did not run, a node's clock is
off), so a poll is never refused for want of a partition; when the day's partition is
created later, its rows move out of the default one first.
"""

import re
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from core.db import db_now
from telemetry import sql

TABLE = "telemetry_gpusample"
DEFAULT = f"{TABLE}_default"
_DAY_NAME = re.compile(rf"^{TABLE}_(\d{{8}})$")


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def partition_name(day: date) -> str:
    return f"{TABLE}_{day:%Y%m%d}"


def sample_partitions() -> list[date]:
    """The days that have a partition, oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(sql.PARTITIONS, [TABLE])
        names = [name for (name,) in cursor.fetchall()]
    return sorted(date.fromisoformat(m[1]) for name in names if (m := _DAY_NAME.match(name)))


@transaction.atomic
def sample_partition_create(day: date) -> bool:
    """Create `day`'s partition unless it exists, moving that day's rows out of the default
    partition into it (PostgreSQL refuses a partition whose rows sit in the default one)."""
    name = partition_name(day)
    start, end = _midnight(day), _midnight(day + timedelta(days=1))
    with connection.cursor() as cursor:
        # Locked first: a second run waits here, then finds the partition made.
        cursor.execute(sql.table_lock(DEFAULT))
        cursor.execute(sql.TABLE_EXISTS, [name])
        if cursor.fetchone()[0]:
            return False
        cursor.execute(sql.partition_create(name, like=TABLE))
        cursor.execute(sql.partition_fill(name, default=DEFAULT), {"start": start, "end": end})
        cursor.execute(sql.partition_attach(name, to=TABLE), [start, end])
    return True


def sample_partitions_ensure(*, now: datetime | None = None) -> int:
    """Partitions from yesterday to TELEMETRY_PARTITIONS_AHEAD_DAYS ahead; how many were new."""
    today = (now or db_now()).astimezone(UTC).date()
    ahead = settings.ANCHORGPU["PARTITIONS_AHEAD_DAYS"]
    return sum(sample_partition_create(today + timedelta(days=i)) for i in range(-1, ahead + 1))


@transaction.atomic
def samples_prune(*, before: datetime) -> dict:
    """Drop the day partitions wholly before `before`; delete the older rows of the day
    it falls in and of the default partition. Returns the partitions dropped and the rows
    deleted (a dropped partition's rows are not counted: that would read them all)."""
    dropped = 0
    with connection.cursor() as cursor:
        # A partition with deferred foreign-key checks pending cannot be dropped: run them
        # now (only a caller's enclosing transaction that wrote samples has any).
        cursor.execute(sql.CONSTRAINTS_IMMEDIATE)
        for day in sample_partitions():
            if _midnight(day + timedelta(days=1)) <= before:
                cursor.execute(sql.table_drop(partition_name(day)))
                dropped += 1
        cursor.execute(sql.rows_before_delete(TABLE), [before])
        deleted = cursor.rowcount
    return {"partitions_dropped": dropped, "samples": deleted}
