"""Keeping the capacity read model (rentals.models.summary): a refresh per GPU model, run by
a worker within seconds of a change to its holdings and every minute regardless (time alone
moves holdings in and out of the days).

A change's service calls `capacity_changed` inside its transaction: once it commits, the
model's change version moves on (in Redis, as the catalog's version does) and a refresh is
queued a moment later, one per model however many changes commit meanwhile. A refresh
reads the version before its statement, so a change whose bump it did not see is refreshed
again by the task that change queued. Without Redis nothing is queued and the minute's
refresh catches up; readers fall back to the exact statements when the rows are too old."""

import logging
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Literal

from celery import current_app
from django.db import connection, transaction
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import RedisError

from catalog.models import GpuModel, NodeState
from core.cache import breaker
from core.dates import DAY_US
from core.db import db_now
from core.versions import CATALOG, bump, cache
from rentals.models import CapacitySummary
from rentals.selectors.summary import NODE_HORIZON, SUMMARY_DAYS
from rentals.sql import summary as summary_sql

logger = logging.getLogger(__name__)

# A burst of changes queues one refresh per model: the first change's task runs this long
# after it, once the mark that held the others back has expired (so its snapshot sees them).
DEBOUNCE_SECONDS = 1
REFRESH_TASK = "rentals.tasks.capacity_summary_refresh_task"

# A refresh's outcome: its statement's time in milliseconds, or why it did not run.
Refreshed = float | Literal["busy", "current"]


def capacity_version_key(gpu_model_id: int) -> str:
    return f"version:capacity:{gpu_model_id}"


def capacity_version(gpu_model_id: int) -> int:
    """The model's change version (0 where Redis has none or does not answer)."""
    return int(cache.get(capacity_version_key(gpu_model_id)) or 0)


def _queue(gpu_model_id: int) -> None:
    if not cache.add(f"capacity-queued:{gpu_model_id}", 1, timeout=DEBOUNCE_SECONDS):
        return  # a refresh is queued and has not started: it will see this change
    if not breaker.allows():
        return
    try:
        current_app.send_task(REFRESH_TASK, args=[gpu_model_id], countdown=DEBOUNCE_SECONDS + 0.2)
    except (RedisError, OSError, BrokerError) as exc:
        breaker.failure(exc)
        logger.warning("capacity refresh of model %s left for the minute's run", gpu_model_id)


def holdings_changed(*, gpu_model_ids: Iterable[int]) -> None:
    """Live holdings of these models changed in the current transaction (a booking, a
    cancel, an extension, a swap, a maintenance window): both read models of them follow
    once it commits, the catalog list's GPUs free now (`CATALOG`) and the capacity read
    model."""
    bump(CATALOG)
    capacity_changed(gpu_model_ids=gpu_model_ids)


def capacity_changed(*, gpu_model_ids: Iterable[int]) -> None:
    """The holdings of these models changed in the current transaction: once it commits,
    move their versions on and queue their refreshes. Inside the caller's transaction."""
    ids = sorted(set(gpu_model_ids))

    def changed() -> None:
        for pk in ids:
            cache.incr_from_zero(capacity_version_key(pk))
            _queue(pk)

    transaction.on_commit(changed)


@transaction.atomic
def capacity_summary_refresh(*, gpu_model_id: int, force: bool = True) -> Refreshed:
    """Rewrite the model's summary rows in one statement; its time in milliseconds, or
    "busy" when another refresh of the model is running (single-flight), or (unless `force`)
    "current" when the rows are already at the model's change version."""
    version = capacity_version(gpu_model_id)  # before the statement's snapshot
    with connection.cursor() as cursor:
        cursor.execute(summary_sql.LOCK, {"model": gpu_model_id})
        if not cursor.fetchone()[0]:
            return "busy"
        if not force:
            kept = CapacitySummary.objects.filter(gpu_model_id=gpu_model_id).first()
            if kept is not None and kept.version == version:
                return "current"
        now = db_now()
        first = now.replace(hour=0, minute=0, second=0, microsecond=0)
        started = time.perf_counter()
        cursor.execute(
            summary_sql.REFRESH,
            {"model": gpu_model_id, "active": NodeState.ACTIVE, "now": now, "first": first,
             "days": SUMMARY_DAYS, "ahead": now + NODE_HORIZON, "version": version,
             "day0": first, "day_n": first + timedelta(days=SUMMARY_DAYS), "day_us": DAY_US},
        )  # fmt: skip
        return (time.perf_counter() - started) * 1000


def capacity_summaries_refresh() -> dict[int, Refreshed]:
    """Every model's summary (the minute's run): each model its own transaction."""
    return {
        pk: capacity_summary_refresh(gpu_model_id=pk)
        for pk in GpuModel.objects.order_by("pk").values_list("pk", flat=True)
    }
