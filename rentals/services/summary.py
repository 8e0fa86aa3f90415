"""Keeping the capacity read model (rentals.models.summary): a refresh per GPU model, run by
a worker within seconds of a change to its holdings and every minute regardless (time alone
moves holdings in and out of now, the 30-day horizon and the days).

A change's service calls `capacity_changed` inside its transaction, naming the nodes whose
holdings it changed: it marks them for the model's next refresh (CapacityChange, in the
same transaction, so the change and its mark commit together), and once it commits the
model's change version moves on (in Redis, as the catalog's version does) and a refresh is
queued a moment later, one per model however many changes commit meanwhile. A refresh
reads the version before its statement, so a change whose bump it did not see is refreshed
again by the task that change queued. Without Redis nothing is queued and the minute's
refresh catches up; readers fall back to the exact statements when the rows are too old.

A refresh is incremental: it recomputes the nodes marked and those whose figures move by
time alone by now (CapacityNodeDays.due_at), and moves the model's rows by the difference,
so its cost follows what changed, not the fleet. The first refresh of a UTC day moves the
days on by one (yesterday's rows go, the new last day is added) and recomputes the nodes
whose holdings reach the days' end. It reads the model whole (the full refresh) where it
cannot bound what changed: no summary yet, more than a day since the last, a mark naming no
node, or more nodes owed than reading them all would cost."""

import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db import connection, transaction

from catalog.models import GpuModel, NodeState
from core.dates import DAY_US
from core.db import db_now
from core.publish import publish_once
from core.versions import CATALOG, bump, cache
from rentals.models import CapacitySummary
from rentals.selectors.summary import NODE_HORIZON, SUMMARY_DAYS
from rentals.sql import summary as summary_sql

# A burst of changes queues one refresh per model (core.publish.publish_once): the first
# change's task runs this long after it, once the mark that held the others back has
# expired (so its snapshot sees them).
DEBOUNCE_SECONDS = 1
DAY = timedelta(days=1)
REFRESH_TASK = "rentals.tasks.capacity_summary_refresh_task"

# A refresh's outcome: its statements' time in milliseconds, or why it did not run.
Refreshed = float | Literal["busy", "current"]
# Past this many nodes owed at once, one read of the whole model costs less than theirs.
INCREMENTAL_NODES = 400


def capacity_version_key(gpu_model_id: int) -> str:
    return f"version:capacity:{gpu_model_id}"


def capacity_version(gpu_model_id: int) -> int:
    """The model's change version (0 where Redis has none or does not answer)."""
    return int(cache.get(capacity_version_key(gpu_model_id)) or 0)


def holdings_changed(
    *, gpu_model_ids: Iterable[int], node_ids: Iterable[int] | None = None
) -> None:
    """Live holdings of these models changed in the current transaction (a booking, a
    cancel, an extension, a swap, a maintenance window), on `node_ids` (None: any of
    theirs): both read models of them follow once it commits, the catalog list's GPUs free
    now (`CATALOG`) and the capacity read model."""
    bump(CATALOG)
    capacity_changed(gpu_model_ids=gpu_model_ids, node_ids=node_ids)


def capacity_changed(
    *, gpu_model_ids: Iterable[int], node_ids: Iterable[int] | None = None
) -> None:
    """The capacity of these models changed in the current transaction, on `node_ids` (their
    holdings, state, size, region or model; None: any of theirs, which the next refresh
    reads whole): mark the nodes for the models' next refreshes, and once it commits move
    their versions on and queue the refreshes. Inside the caller's transaction."""
    ids = sorted(set(gpu_model_ids))
    nodes = None if node_ids is None else sorted(set(node_ids))
    if not ids or nodes == []:
        return
    with connection.cursor() as cursor:
        cursor.execute(summary_sql.MARK, {"models": ids, "nodes": nodes})

    def changed() -> None:
        for pk in ids:
            cache.incr_from_zero(capacity_version_key(pk))
            publish_once(REFRESH_TASK, pk, within=DEBOUNCE_SECONDS)

    transaction.on_commit(changed)


@transaction.atomic
def capacity_summary_refresh(
    *, gpu_model_id: int, force: bool = True, full: bool = False, node_ids: Iterable[int] = (),
    now: datetime | None = None,
) -> Refreshed:  # fmt: skip
    """Bring the model's summary rows to now: the nodes owed a look (marked by changes, or
    moved by time: `OWED`, and `node_ids`) recomputed and the rows moved by the difference,
    or (`full`, or where that cannot be bounded) every row rewritten from all the holdings.
    Its time in milliseconds, or "busy" when another refresh of the model is running
    (single-flight), or (unless `force`) "current" when the rows are already at the model's
    change version. `now` (the database's clock by default) never goes back: a refresh
    "before" the rows' as_of reads the model whole."""
    version = capacity_version(gpu_model_id)  # before the statements' snapshots
    with connection.cursor() as cursor:
        cursor.execute(summary_sql.LOCK, {"model": gpu_model_id})
        if not cursor.fetchone()[0]:
            return "busy"
        kept = CapacitySummary.objects.filter(gpu_model_id=gpu_model_id).first()
        if not force and kept is not None and kept.version == version:
            return "current"
        now = now or db_now()
        first = now.replace(hour=0, minute=0, second=0, microsecond=0)
        day_n = first + timedelta(days=SUMMARY_DAYS)
        params: dict[str, Any] = {
            "model": gpu_model_id, "active": NodeState.ACTIVE, "now": now, "first": first,
            "first_day": first.date(), "days": SUMMARY_DAYS, "ahead": now + NODE_HORIZON,
            "horizon": NODE_HORIZON, "version": version, "day0": first, "day_n": day_n,
            "day_us": DAY_US, "last": (day_n - DAY).date(), "last_but_one": day_n - 2 * DAY,
        }  # fmt: skip
        started = time.perf_counter()
        cursor.execute(summary_sql.OWED, params)
        owed = {node for (node,) in cursor.fetchall()} | set(node_ids)
        days_on = (now.date() - kept.as_of.date()).days if kept is not None else None
        if days_on == 1 and not full:  # the day after the rows': the nodes at the days' end too
            cursor.execute(summary_sql.ROLL_OWED, params)
            owed |= {node for (node,) in cursor.fetchall()}
        if (
            full or kept is None or kept.as_of > now or days_on not in (0, 1)
            or None in owed or len(owed) > INCREMENTAL_NODES
        ):  # fmt: skip
            cursor.execute(summary_sql.REFRESH, params)
        elif days_on == 1 or owed:
            if days_on == 1:
                cursor.execute(summary_sql.ROLL, params)
            moves = summary_sql.REFRESH_NODES if owed else summary_sql.STANDS
            cursor.execute(moves, {**params, "nodes": sorted(owed)})
        else:
            cursor.execute(summary_sql.STANDS, params)
            return (time.perf_counter() - started) * 1000
        bump(CATALOG)  # the catalog's GPUs free now (rentals.selectors.catalog) moved with it
        return (time.perf_counter() - started) * 1000


def capacity_summaries_refresh() -> dict[int, Refreshed]:
    """Every model's summary (the minute's run): each model its own transaction."""
    return {
        pk: capacity_summary_refresh(gpu_model_id=pk)
        for pk in GpuModel.objects.order_by("pk").values_list("pk", flat=True)
    }
