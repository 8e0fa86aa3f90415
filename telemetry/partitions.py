"""Raw samples live in a table partitioned by day (`telemetry_gpusample_YYYYMMDD`), so that
retention drops whole days instead of deleting hundreds of millions of rows, and reads of
a time range touch only its days.

Partitions are created ahead by a beat task (`sample_partitions_ensure`). A default
partition catches rows no day partition takes (the task did not run, a node's clock is
off), so a poll is never refused for want of a partition; when the day's partition is
created later, its rows move out of the default one first.

GPU hours and days (`telemetry_gpuhour`, `telemetry_gpuday`) are partitioned the same way
by month (`telemetry_gpuhour_YYYYMM`), created ahead by the same task; rollup retention
drops whole months.
"""

import re
from datetime import UTC, date, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from core.db import db_now
from telemetry import sql

TABLE = "telemetry_gpusample"
DEFAULT = f"{TABLE}_default"
_DAY_NAME = re.compile(rf"^{TABLE}_(\d{{4}})(\d{{2}})(\d{{2}})$")
MONTHLY = ("telemetry_gpuhour", "telemetry_gpuday")


def _midnight(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=UTC)


def partition_name(day: date) -> str:
    return f"{TABLE}_{day:%Y%m%d}"


def _partitions(table: str, pattern: re.Pattern[str]) -> list[date]:
    """The dates named by `table`'s partitions that match `pattern` (its groups: year, month
    and, for days, the day), oldest first."""
    with connection.cursor() as cursor:
        cursor.execute(sql.PARTITIONS, [table])
        names = [name for (name,) in cursor.fetchall()]
    return sorted(
        date(int(m[1]), int(m[2]), int(m[3]) if m.lastindex == 3 else 1)
        for name in names
        if (m := pattern.match(name))
    )


def sample_partitions() -> list[date]:
    """The days that have a partition, oldest first."""
    return _partitions(TABLE, _DAY_NAME)


@transaction.atomic
def _partition_create(
    table: str, name: str, start: datetime, end: datetime, *, autovacuum: bool = False
) -> bool:
    """Create `table`'s partition `name` for [start, end) unless it exists, moving those rows
    out of the default partition into it (PostgreSQL refuses a partition whose rows sit in
    the default one); `autovacuum`: with `sql.partition_autovacuum`'s settings."""
    default = f"{table}_default"
    with connection.cursor() as cursor:
        # Locked first: a second run waits here, then finds the partition made.
        cursor.execute(sql.table_lock(default))
        cursor.execute(sql.TABLE_EXISTS, [name])
        if cursor.fetchone()[0]:
            return False
        cursor.execute(sql.partition_create(name, like=table))
        if autovacuum:
            cursor.execute(sql.partition_autovacuum(name))
        cursor.execute(sql.partition_fill(name, default=default), {"start": start, "end": end})
        cursor.execute(sql.partition_attach(name, to=table), [start, end])
    return True


def sample_partition_create(day: date) -> bool:
    """`day`'s partition of the raw samples unless it exists (`_partition_create`)."""
    start, end = _midnight(day), _midnight(day + timedelta(days=1))
    return _partition_create(TABLE, partition_name(day), start, end)


def sample_partitions_ensure(*, now: datetime | None = None) -> int:
    """Partitions from yesterday to TELEMETRY_PARTITIONS_AHEAD_DAYS ahead; how many were new."""
    today = (now or db_now()).astimezone(UTC).date()
    ahead = settings.ANCHORGPU["PARTITIONS_AHEAD_DAYS"]
    return sum(sample_partition_create(today + timedelta(days=i)) for i in range(-1, ahead + 1))


def month_partitions_ensure(*, now: datetime | None = None) -> int:
    """The month partitions of GPU hours and days from last month to the month after this
    one; how many were new."""
    this = (now or db_now()).astimezone(UTC).date().replace(day=1)
    months = (_month_after(this, -1), this, _month_after(this))
    return sum(month_partition_create(table, month) for table in MONTHLY for month in months)


def _month_after(month: date, step: int = 1) -> date:
    """The first day of the month `step` months after `month`'s."""
    index = month.year * 12 + month.month - 1 + step
    return date(index // 12, index % 12 + 1, 1)


def month_partition_name(table: str, month: date) -> str:
    return f"{table}_{month:%Y%m}"


def month_partitions(table: str) -> list[date]:
    """The months of `table` that have a partition, oldest first."""
    return _partitions(table, re.compile(rf"^{table}_(\d{{4}})(\d{{2}})$"))


def month_partition_create(table: str, month: date) -> bool:
    """`month`'s partition of `table` unless it exists (`_partition_create`), with its
    autovacuum settings."""
    start, end = _midnight(month), _midnight(_month_after(month))
    name = month_partition_name(table, month)
    return _partition_create(table, name, start, end, autovacuum=True)


@transaction.atomic
def months_prune(*, before: datetime) -> dict[str, int]:
    """Drop the month partitions of GPU hours and days wholly before `before`, and delete
    the default partitions' older rows; the month `before` falls in is kept whole (rollups
    are kept up to a month past their retention, never less). Returns the partitions dropped
    and the default partitions' rows deleted."""
    dropped = deleted = 0
    with connection.cursor() as cursor:
        for table in MONTHLY:
            for month in month_partitions(table):
                if _midnight(_month_after(month)) <= before:
                    cursor.execute(sql.table_drop(month_partition_name(table, month)))
                    dropped += 1
            cursor.execute(sql.rows_before_delete(f"{table}_default"), [before])
            deleted += cursor.rowcount
    return {"month_partitions_dropped": dropped, "rollups": deleted}


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
