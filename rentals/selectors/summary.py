"""Reads of the capacity read model (rentals.models.summary): a model's days, or nothing
when its rows are too old or cannot answer the request, so the caller reads the holdings
exactly instead (slower, never wrong). What is read here is advisory: pages say "as of",
and booking checks again."""

from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Max, Sum
from django.utils import timezone

from catalog.models import GpuModel
from catalog.software import NO_REQUIRES, Requires
from rentals.models import BookedAheadDay, CapacityDay, CapacitySummary
from rentals.sql import summary as summary_sql

if TYPE_CHECKING:  # availability imports this module
    from rentals.selectors.availability import AvailabilityDay

# Rows older than this are not served: no worker keeps them (or it fell behind).
FRESH = timedelta(minutes=2)
SUMMARY_DAYS = 92  # days written from as_of's: the calendar's 13 weeks and today's remainder
NODE_HORIZON = timedelta(days=30)  # CapacityNode.min_free_30d's, from as_of
# Placement's first guess: at most this many nodes from the summary, each checked exactly.
PLACEMENT_CANDIDATES = 32


def capacity_as_of(*, gpu_model: GpuModel, now: datetime | None = None) -> datetime | None:
    """When the model's rows were written, while they are fresh enough to serve; else None."""
    as_of = (
        CapacitySummary.objects.filter(gpu_model_id=gpu_model.pk)
        .values_list("as_of", flat=True)
        .first()
    )
    if as_of is None or (now or timezone.now()) - as_of > FRESH:
        return None
    return as_of


def booked_ahead_summary(
    *, gpu_model_ids: list[int], first: date, days: int, now: datetime | None = None
) -> tuple[dict[int, datetime], dict[tuple[int, date], int]] | None:
    """Per model, the instant its rows are as of, and per (model, day) from `first` the
    GPU-microseconds its allocations hold (BookedAheadDay: the reports' booked-ahead rule);
    None unless every model's summary is fresh and starts on `first` (its `as_of`'s day),
    so a caller reads the holdings exactly instead. Two queries."""
    if days > SUMMARY_DAYS:
        return None
    now = now or timezone.now()
    as_of = dict(
        CapacitySummary.objects.filter(gpu_model_id__in=gpu_model_ids).values_list(
            "gpu_model_id", "as_of"
        )
    )
    if set(as_of) != set(gpu_model_ids) or any(
        now - at > FRESH or at.date() != first for at in as_of.values()
    ):
        return None
    rows = BookedAheadDay.objects.filter(
        gpu_model_id__in=gpu_model_ids, day__gte=first, day__lt=first + timedelta(days=days)
    ).values_list("gpu_model_id", "day", "gpu_us")
    return as_of, {(model, day): us for model, day, us in rows}


def capacity_free_now(
    *, gpu_model_ids: list[int], now: datetime | None = None
) -> dict[int, tuple[int, datetime]]:
    """Per model of `gpu_model_ids` whose summary is fresh, its GPUs free now on its active
    nodes and the instant that is as of; the others are missing (read them exactly). One
    query."""
    now = now or timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(summary_sql.FREE_NOW, {"models": gpu_model_ids, "fresh": now - FRESH})
        return {model: (free, as_of) for model, as_of, free in cursor.fetchall()}


def capacity_days_summary(
    *, gpu_model: GpuModel, start: datetime, days: int, region_id: int | None = None,
    requires: Requires = NO_REQUIRES, now: datetime | None = None,
) -> "tuple[list[AvailabilityDay], datetime] | None":  # fmt: skip
    """`availability_days`' answer from the summary, with its `as_of`; None where the
    summary cannot give it: too old or missing, a software stack asked for (the summary is
    not kept per stack), more days than it keeps, or `start` on another day than its first
    (today's figures count from `as_of`, the rest from midnight). Two queries."""
    if requires or days > SUMMARY_DAYS:
        return None
    as_of = capacity_as_of(gpu_model=gpu_model, now=now)
    if as_of is None or start.date() != as_of.date():
        return None
    first = as_of.date()
    found = CapacityDay.objects.filter(
        gpu_model_id=gpu_model.pk, day__gte=first, day__lt=first + timedelta(days=days)
    )
    if region_id is not None:
        found = found.filter(region_id=region_id)
    by_day = {
        row["day"]: row
        for row in found.order_by()
        .values("day")
        .annotate(
            one=Max("max_gpus_on_one_node"), whole=Sum("free_whole_nodes"), total=Sum("free_gpus")
        )
    }
    rows: list[AvailabilityDay] = []
    for k in range(days):
        day = first + timedelta(days=k)
        row = by_day.get(day) or {"one": 0, "whole": 0, "total": 0}
        rows.append(
            {
                "date": day,
                "max_gpus_on_one_node": row["one"],
                "free_whole_nodes": row["whole"],
                "free_gpus": row["total"],
            }
        )
    return rows, as_of


def capacity_nodes_fullest(
    *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None = None, limit: int = PLACEMENT_CANDIDATES,
    now: datetime | None = None,
) -> list[int]:  # fmt: skip
    """At most `limit` of the model's nodes (of `region_id` where given) that the summary
    says have `gpu_count` GPUs free for the window, fullest first: placement's first guess,
    each checked exactly under its lock. A window starting within FRESH of now (a booking
    from now) asks the GPUs free now; a later one inside the summary's horizon asks the
    fewest free over it. Empty where the summary cannot guess: rows too old or missing
    (the model's CapacitySummary.as_of, which its rows stand as of), or a window ending past
    their horizon. One query."""
    now = now or timezone.now()
    if starts_at <= now + FRESH:
        statement = summary_sql.NODES_FULLEST_NOW, summary_sql.NODES_FULLEST_NOW_IN_REGION
    else:
        statement = summary_sql.NODES_FULLEST_AHEAD, summary_sql.NODES_FULLEST_AHEAD_IN_REGION
    params: dict[str, Any] = {
        "model": gpu_model.pk, "fresh": now - FRESH, "count": gpu_count,
        "horizon": ends_at - NODE_HORIZON, "region": region_id, "limit": limit,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(statement[region_id is not None], params)
        return [node_id for (node_id,) in cursor.fetchall()]
