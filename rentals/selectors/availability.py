"""Availability: which GPUs are free when, how many a model offers now, where a request
fits and the earliest start when nothing fits now. Reads only; placement.py locks."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict, cast

from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.db.models import Count
from django.utils import timezone

from catalog.models import GpuModel, Node, NodeState, Region
from catalog.selectors import catalog_rows, gpu_model_list, software_by_model, software_unknown
from catalog.software import NO_REQUIRES, Requires
from rentals.selectors.summary import (
    FRESH,
    NODE_HORIZON,
    capacity_as_of,
    capacity_days_summary,
    capacity_free_now,
)
from rentals.sql import capacity as capacity_sql
from rentals.sql import holdings as holdings_sql
from rentals.sql import summary as summary_sql

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

MAX_START_CANDIDATES = 500
# A start window names at most this many of the nodes it fits on (a cluster's, at least its
# node count), beside how many there are: the answer does not grow with the fleet.
WINDOW_NODES_SHOWN = 16
CALENDAR_DAYS = 91  # 13 weeks


class Offer(TypedDict):
    """What `gpu_model_offers` sets on each model."""

    free_gpus_now: int
    free_gpus_as_of: datetime | None  # from the capacity read model as of then; None: exact
    software: dict[str, Any]  # catalog.selectors.software_by_model's, one model's


def gpu_model_offers(
    *, filters: Mapping[str, Any] | None = None, at: datetime | None = None
) -> "list[WithAnnotations[GpuModel, Offer]]":
    """The catalog's models, each with `free_gpus_now`: from the capacity read model where
    the model's is fresh (`free_gpus_as_of` says as of when), else read exactly from the
    live holdings (`free_gpus_as_of` None). Four queries whatever the number of models and
    GPUs (the models, their prices, the summary's free GPUs, the software), five when some
    model's summary is stale or missing (the exact read, which reads every live holding)."""
    at = at or timezone.now()
    # Each model gets the attributes `Offer` names below, before it is returned.
    models = cast(
        "list[WithAnnotations[GpuModel, Offer]]", list(gpu_model_list(filters=filters, at=at))
    )
    kept = capacity_free_now(gpu_model_ids=[model.pk for model in models], now=at)
    exact: dict[int, int] = {}
    if len(kept) < len(models):
        with connection.cursor() as cursor:
            cursor.execute(holdings_sql.FREE_NOW, {"now": at, "active": NodeState.ACTIVE})
            exact = dict(cursor.fetchall())
    software = software_by_model()
    for model in models:
        model.free_gpus_now, model.free_gpus_as_of = kept.get(
            model.pk, (exact.get(model.pk, 0), None)
        )
        model.software = software.get(model.pk) or software_unknown()
    return models


def max_gpus_per_node(*, gpu_model: GpuModel) -> int:
    """The most GPUs one active node of the model has (the catalog's cached rows)."""
    return catalog_rows().gpus_per_node.get(gpu_model.pk, 0)


def cluster_shape(*, gpu_model: GpuModel) -> tuple[int, int]:
    """(GPUs per node, nodes in the largest network group) of the model's active nodes that
    can form clusters: a cluster is that many GPUs per node, on at most that many nodes."""
    # The nodes' GPU counts (Node.gpu_count, kept by the database's triggers), counted per
    # network group and size in the database: a few rows, not one per GPU or node.
    sizes = list(
        Node.objects.filter(gpu_model=gpu_model, state=NodeState.ACTIVE, gpu_count__gt=0)
        .exclude(network_group="")
        .order_by()
        .values("network_group", "gpu_count")
        .annotate(nodes=Count("id"))
    )
    per_node = max((row["gpu_count"] for row in sizes), default=0)
    groups = [row["nodes"] for row in sizes if row["gpu_count"] == per_node]
    return per_node, max(groups, default=0)


def _room_read(
    statement: str, *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime,
    ends_at: datetime, region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> list[tuple[Any, ...]]:  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            statement,
            {"model": gpu_model.pk, "active": NodeState.ACTIVE, "count": gpu_count,
             "starts_at": starts_at, "ends_at": ends_at, "region": region_id,
             **requires.params()},
        )  # fmt: skip
        rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def candidate_nodes(
    *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> list[int]:  # fmt: skip
    """Nodes with room (in `region_id`, or any region; whose stack meets `requires`),
    fullest first: packing keeps whole nodes free for whole-node bookings.

    Counted in the database (one grouped query), so the cost does not grow with fleet size
    on the Python side.
    """
    rows = _room_read(
        capacity_sql.ROOM_NODES,
        gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at,
        region_id=region_id, requires=requires,
    )  # fmt: skip
    return [node_id for (node_id,) in rows]


def fits(
    *, gpu_model: GpuModel, gpu_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> bool:  # fmt: skip
    """Whether some node (in `region_id`, or any region) has room: a yes or no, not the
    candidate list (every quote asks)."""
    rows = _room_read(
        capacity_sql.ROOM_EXISTS,
        gpu_model=gpu_model, gpu_count=gpu_count, starts_at=starts_at, ends_at=ends_at,
        region_id=region_id, requires=requires,
    )  # fmt: skip
    return bool(rows[0][0])


def earliest_start(
    *, gpu_model: GpuModel, gpu_count: int = 1, node_count: int | None = None,
    duration: timedelta, not_before: datetime, region_id: int | None = None,
    requires: Requires = NO_REQUIRES,
) -> datetime | None:  # fmt: skip
    """The first instant ≥ not_before at which the request (GPUs on one node, or whole
    nodes of one network group; in `region_id`, or any region) fits, or None if none is in
    sight (the first of `start_windows`)."""
    windows = start_windows(
        gpu_model=gpu_model, duration=duration, not_before=not_before, gpu_count=gpu_count,
        node_count=node_count, region_id=region_id, limit=1, requires=requires,
    )  # fmt: skip
    return windows[0]["starts_at"] if windows else None


class AvailabilityDay(TypedDict):
    """One day of `availability_days`."""

    date: date
    max_gpus_on_one_node: int
    free_whole_nodes: int
    free_gpus: int | Decimal  # a SQL sum (a Decimal); 0 where the model has no node


def availability_days(
    *, gpu_model: GpuModel, start: datetime, days: int = 90, region_id: int | None = None,
    requires: Requires = NO_REQUIRES,
) -> list[AvailabilityDay]:  # fmt: skip
    """Per day from `start`'s day: the most GPUs free on one node for the whole day, the
    whole nodes free, and the GPUs free in all (today counts from now). One statement over
    the same holds the exclusion constraint guards, so a day is never shown freer than a
    booking for it would find."""
    first = start.replace(hour=0, minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            capacity_sql.FREE_BY_DAY_IN_REGION if region_id else capacity_sql.FREE_BY_DAY,
            {
                "first": first, "days": days, "now": start,
                "model": gpu_model.pk, "active": NodeState.ACTIVE, "region": region_id,
                **requires.params(),
            },
        )  # fmt: skip
        rows = cursor.fetchall()
    if not rows:  # no node of the model (in the region, meeting the stack): every day empty
        rows = [(first + timedelta(days=k), 0, 0, 0) for k in range(days)]
    return [
        {
            "date": d.date(),
            "max_gpus_on_one_node": one,
            "free_whole_nodes": whole,
            "free_gpus": total,
        }
        for d, one, whole, total in rows
    ]


def availability_days_read(
    *, gpu_model: GpuModel, start: datetime, days: int = 90, region_id: int | None = None,
    requires: Requires = NO_REQUIRES,
) -> tuple[list[AvailabilityDay], datetime | None]:  # fmt: skip
    """`availability_days`' answer and the instant it is as of: from the capacity read model
    where it is fresh and can answer (pages then say "as of"), else read exactly (None)."""
    summary = capacity_days_summary(
        gpu_model=gpu_model, start=start, days=days, region_id=region_id, requires=requires
    )
    if summary is not None:
        return summary
    exact = availability_days(
        gpu_model=gpu_model, start=start, days=days, region_id=region_id, requires=requires
    )
    return exact, None


@dataclass(frozen=True)
class CalendarDay:
    """One day of the booking page's calendar: `free` is what the calendar counts (whole
    nodes free, or the most GPUs free on one node), `shade` its tint in percent."""

    date: date
    max_gpus_on_one_node: int
    free_whole_nodes: int
    free_gpus: int
    free: int
    shade: int


@dataclass(frozen=True)
class CalendarStep:
    """One step of the calendar's legend: a count and its tint."""

    free: int
    shade: int


@dataclass(frozen=True)
class Calendar:
    """The booking page's availability calendar: `days` by whole weeks from today, counted
    out of `of` (the active nodes when whole nodes are asked for, else the GPUs of one node)."""

    weeks: list[list[CalendarDay]]
    per_node: int  # the GPUs of the model's largest node, at least 1
    nodes: int  # the model's active nodes (in the region), at least 1
    scale: list[CalendarStep]
    as_of: datetime | None = None  # read from the capacity read model as of then; None: exact


def availability_calendar(
    *, gpu_model: GpuModel, start: datetime, per_node: int, whole_nodes: bool,
    region: Region | None = None, requires: Requires = NO_REQUIRES, days: int = CALENDAR_DAYS,
) -> Calendar:  # fmt: skip
    """`days` days of availability from `start`'s day, each counted as the calendar shows it
        (whole nodes free when `whole_nodes`, else the most GPUs free on one node) and tinted
        against the most there could be; `per_node` is `max_gpus_per_node`, which the caller
        has read already. Three queries: the summary's freshness, the days (from the capacity read
    model, `as_of` then set; or exactly, two queries) and the active nodes."""
    rows, as_of = availability_days_read(
        gpu_model=gpu_model, start=start, days=days,
        region_id=region.pk if region else None, requires=requires,
    )  # fmt: skip
    nodes = max(
        gpu_model.nodes.filter(state=NodeState.ACTIVE)
        .filter(**({"region": region} if region else {}))
        .count(),
        1,
    )
    of = nodes if whole_nodes else max(per_node, 1)
    shaped: list[CalendarDay] = []
    for row in rows:
        free = row["free_whole_nodes"] if whole_nodes else row["max_gpus_on_one_node"]
        shaped.append(
            CalendarDay(
                date=row["date"],
                max_gpus_on_one_node=row["max_gpus_on_one_node"],
                free_whole_nodes=row["free_whole_nodes"],
                free_gpus=int(row["free_gpus"]),  # a SQL sum (a Decimal)
                free=free,
                shade=calendar_shade(free, of),
            )
        )
    return Calendar(
        weeks=[shaped[i : i + 7] for i in range(0, len(shaped), 7)],
        per_node=max(per_node, 1),
        nodes=nodes,
        scale=[CalendarStep(free=n, shade=calendar_shade(n, of)) for n in calendar_scale_steps(of)],
        as_of=as_of,
    )


def calendar_shade(free: int, of: int) -> int:
    """A day's shade, in percent of the dark ink: none free is 0 (drawn hatched instead),
    one free already clearly tinted (15), all free the darkest (50), evenly between."""
    if free <= 0:
        return 0
    return 15 + round(35 * min(free, of) / of)


def calendar_scale_steps(of: int) -> list[int]:
    """The legend's values: every count up to 8, else nine even steps from 0 to `of`."""
    if of <= 8:
        return list(range(of + 1))
    return sorted({round(of * i / 8) for i in range(9)})


def _params(
    *, gpu_model: GpuModel, duration: timedelta, gpu_count: int, node_count: int | None,
    region_id: int | None, requires: Requires,
) -> dict[str, Any]:  # fmt: skip
    per_node = cluster_shape(gpu_model=gpu_model)[0] if node_count else 0
    return {
        "per_node": per_node,
        "model": gpu_model.pk, "active": NodeState.ACTIVE, "duration": duration,
        "count": 1 if node_count else gpu_count, "whole": bool(node_count),
        "nodes": node_count or 1, "region": region_id, "limit": MAX_START_CANDIDATES,
        "shown": max(WINDOW_NODES_SHOWN, node_count or 0),
        **requires.params(),
    }  # fmt: skip


def _fitting_at(
    cursor: CursorWrapper, t: datetime, params: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """(region, network group, hostnames, how many nodes) where the request fits from `t`:
    for whole nodes, the groups with the fewest free whole nodes first (least
    fragmentation). At most `shown` hostnames, the fullest nodes first."""
    statement = capacity_sql.FITTING_AT_IN_REGION if params["region"] else capacity_sql.FITTING_AT
    cursor.execute(statement, {**params, "t": t})
    rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def _in_spans(t: datetime, spans: list[tuple[Any, ...]]) -> bool:
    return any(since <= t and (until is None or t <= until) for since, until in spans)


def cluster_fits(
    *, gpu_model: GpuModel, node_count: int, starts_at: datetime, ends_at: datetime,
    region_id: int | None = None, requires: Requires = NO_REQUIRES,
) -> bool:  # fmt: skip
    """Whether `node_count` whole nodes of one network group (in `region_id`, or any
    region) are free for the window."""
    params = _params(
        gpu_model=gpu_model, duration=ends_at - starts_at, gpu_count=1, node_count=node_count,
        region_id=region_id, requires=requires,
    )  # fmt: skip
    with connection.cursor() as cursor:
        return bool(_fitting_at(cursor, starts_at, params))


class StartWindow(TypedDict):
    """One of `start_windows`: when, in which region (slug), on which nodes (hostnames: at
    most WINDOW_NODES_SHOWN, or a cluster's node count, fullest first) of how many, and
    the instant that is as of where the capacity read model answered (None: exactly)."""

    starts_at: datetime
    region: str
    nodes: list[str]
    nodes_total: int
    as_of: datetime | None


def start_windows(
    *, gpu_model: GpuModel, duration: timedelta, not_before: datetime, gpu_count: int = 1,
    node_count: int | None = None, region_id: int | None = None, limit: int = 5,
    requires: Requires = NO_REQUIRES, kept: bool = False,
) -> list[StartWindow]:  # fmt: skip
    """The next start times at which the request fits, with where: `gpu_count` GPUs on one
    node, or `node_count` whole nodes of one network group for the same window. Capacity
    only frees up when a holding ends, so those instants are the only candidates.

    `kept`: where the answer is shown "as of" (pages, the availability API), GPUs on one
    node from now may be read from the capacity read model (`_fitting_now_kept`); what
    books or refuses (an earliest start offered with a refusal) asks exactly."""
    params = _params(
        gpu_model=gpu_model, duration=duration, gpu_count=gpu_count, node_count=node_count,
        region_id=region_id, requires=requires,
    )  # fmt: skip
    with connection.cursor() as cursor:
        # Usually the request fits from `not_before` already: that is asked first, and only
        # when it does not give enough windows are the later candidates read, then asked in
        # time order, one statement each, until enough windows.
        as_of: datetime | None = None
        fitting: list[tuple[Any, ...]] = []
        if kept and not node_count:
            as_of, fitting = _fitting_now_kept(
                cursor, gpu_model=gpu_model, t=not_before, params=params
            )
        if not fitting:  # not asked, or none fits as of the summary: ask exactly
            as_of, fitting = None, _fitting_at(cursor, not_before, params)
        rows = [(not_before, where, nodes, total) for where, _group, nodes, total in fitting]
        spans = None  # asked at every candidate instant
        if not rows:
            # It does not fit at `not_before`: it fits exactly at the instants some span of
            # these holds, read at once, and only those are asked (a request may fit nowhere
            # for hundreds of candidates, each a statement).
            cursor.execute(
                capacity_sql.FITTING_SPANS_IN_REGION if region_id else capacity_sql.FITTING_SPANS,
                {**params, "not_before": not_before},
            )
            spans = cursor.fetchall()
            if not spans:
                return []
        if len(rows) < limit:
            cursor.execute(capacity_sql.START_CANDIDATES, {**params, "not_before": not_before})
            for (t,) in cursor.fetchall():
                if t == not_before or spans is not None and not _in_spans(t, spans):
                    continue  # asked above, or does not fit
                fitting = _fitting_at(cursor, t, params)
                rows += [(t, where, nodes, total) for where, _group, nodes, total in fitting]
                if len(rows) >= limit:
                    break
    return [
        {"starts_at": t, "region": where, "nodes": list(nodes), "nodes_total": total,
         "as_of": as_of if t == not_before else None}
        for t, where, nodes, total in rows[:limit]
    ]  # fmt: skip


def _fitting_now_kept(
    cursor: CursorWrapper, *, gpu_model: GpuModel, t: datetime, params: Mapping[str, Any]
) -> tuple[datetime | None, list[tuple[Any, ...]]]:
    """`_fitting_at`'s rows for GPUs on one node from `t`, read from the capacity read model
    (`summary_sql.FITTING_NOW_KEPT`), with the instant they are as of; (None, []) where it
    cannot answer: rows too old or missing, `t` not within FRESH of them (their free-now is
    theirs), or the window ending past their horizon (their fewest free)."""
    as_of = capacity_as_of(gpu_model=gpu_model)
    if as_of is None or t - as_of > FRESH or t + params["duration"] > as_of + NODE_HORIZON:
        return None, []
    statement = (
        summary_sql.FITTING_NOW_KEPT_IN_REGION if params["region"] else summary_sql.FITTING_NOW_KEPT
    )
    cursor.execute(statement, {**params, "t": t})
    return as_of, cursor.fetchall()
