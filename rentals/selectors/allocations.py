"""Reads of allocations and clusters, each for an acting person and team (accounts.roles):
what they may see and act on, in the order lists show them; impaired allocations (staff)."""

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict, cast
from uuid import UUID

from django.db.models import (
    Case,
    CharField,
    Count,
    F,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)

from accounts.roles import Acting, Action
from core.pagination import Key, SortKey, keyset_filter
from rentals.errors import ReadOnly
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationState,
    Cluster,
    ImpairedSpan,
    LedgerEntry,
    Quote,
    span_counts,
)
from rentals.selectors.ledger import SIGNED_AMOUNT

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


def allocation_list(
    *, acting: Acting, state: str | None = None, filters: Mapping[str, Any] | None = None
) -> QuerySet[Allocation]:
    """The team's allocations; staff see every team's (and change only their own) and may
    narrow them by owner, GPU model and node."""
    acting.require(Action.READ)
    qs = (
        Allocation.objects.all()
        if acting.sees_every_team
        else Allocation.objects.filter(team=acting.team)
    )
    if state:
        qs = qs.filter(state=state)
    filters = filters or {}
    if filters.get("user"):
        qs = qs.filter(user__username=filters["user"])
    if filters.get("gpu_model"):
        qs = qs.filter(gpu_model__slug=filters["gpu_model"])
    if filters.get("node"):
        qs = qs.filter(node__hostname=filters["node"])
    return qs.select_related(
        "gpu_model", "node", "node__region", "period", "user", "team"
    ).prefetch_related(
        Prefetch(
            "held",
            queryset=AllocationGpu.objects.select_related("gpu").order_by("gpu__index"),
        ),
        Prefetch(
            "events", queryset=AllocationEvent.objects.select_related("actor").order_by("at", "id")
        ),
    )


_LIST_RANK = Case(
    When(state=AllocationState.RUNNING, then=Value(0)),
    When(state=AllocationState.STOPPED, then=Value(1)),
    When(state=AllocationState.SCHEDULED, then=Value(2)),
    default=Value(3),
    output_field=IntegerField(),
)


class Ranked(TypedDict):
    """The sort key's annotations of `allocations_as_listed` and `allocations_ranked`."""

    list_rank: int
    starts_soon: datetime | None


class Listed(Ranked):
    """What `allocations_as_listed` annotates besides its sort key."""

    paid: Decimal | None
    paid_currency: str | None


def allocations_as_listed(
    qs: QuerySet[Allocation],
) -> "QuerySet[WithAnnotations[Allocation, Listed]]":
    """What runs first: running, then stopped, then scheduled (soonest first), then the
    rest (newest first); each with what it paid (`paid`, `paid_currency`: its charges less
    its refunds and credits; null for a cluster member whose cluster's rows sit on another)."""
    own = LedgerEntry.objects.filter(allocation=OuterRef("pk")).order_by().values("allocation")
    return qs.annotate(
        list_rank=_LIST_RANK,
        starts_soon=_STARTS_SOON,
        paid=Subquery(own.annotate(total=Sum(SIGNED_AMOUNT)).values("total")[:1]),
        paid_currency=Subquery(own.values("currency")[:1], output_field=CharField()),
    ).order_by(*_LIST_ORDER)


_STARTS_SOON = Case(When(state=AllocationState.SCHEDULED, then=F("paid_from")))


_LIST_ORDER = ("list_rank", F("starts_soon").asc(nulls_last=True), "-paid_from", "pk")


def allocations_ranked(
    qs: QuerySet[Allocation],
) -> "QuerySet[WithAnnotations[Allocation, Ranked]]":
    """`qs` in `allocations_as_listed`'s order with only its sort key: no joins, no sums
    (the narrow rows a page is chosen from, core.pagination.keyset_rows)."""
    return (
        qs.select_related(None)
        .prefetch_related(None)
        .order_by()
        .annotate(list_rank=_LIST_RANK, starts_soon=_STARTS_SOON)
        .order_by(*_LIST_ORDER)
    )


# `allocations_as_listed`'s order as a keyset (core.pagination): a row's key is
# (list_rank, starts_soon, paid_from, pk), all annotations or columns of the listed rows.
ALLOCATION_ORDER = (
    SortKey("list_rank"), SortKey("starts_soon", nullable=True),
    SortKey("paid_from", descending=True), SortKey("pk"),
)  # fmt: skip


def allocation_key(allocation: "WithAnnotations[Allocation, Ranked]") -> Key:
    return allocation.list_rank, allocation.starts_soon, allocation.paid_from, allocation.pk


def allocations_counted(qs: QuerySet[Allocation], *, before: Key | None = None) -> tuple[int, int]:
    """(how many allocations `qs` holds, how many of them are listed before the key
    `before`), exact, in one statement."""
    ranked = allocations_ranked(qs).order_by()
    if before is None:
        return ranked.aggregate(total=Count("pk"))["total"], 0
    counts = ranked.aggregate(
        total=Count("pk"),
        before=Count("pk", filter=keyset_filter(ALLOCATION_ORDER, before, forward=False)),
    )
    return counts["total"], counts["before"]


def allocation_get(*, acting: Acting, pk: UUID) -> Allocation | None:
    return allocation_list(acting=acting).filter(pk=pk).first()


def cluster_get(*, acting: Acting, pk: UUID) -> tuple[Cluster | None, list[Allocation]]:
    """(the cluster they may read, its allocations by hostname), or (None, [])."""
    acting.require(Action.READ)
    clusters = Cluster.objects.select_related("gpu_model", "quote")
    if not acting.sees_every_team:
        clusters = clusters.filter(team=acting.team)
    cluster = clusters.filter(pk=pk).first()
    if cluster is None:
        return None, []
    members = allocation_list(acting=acting).filter(cluster=cluster).order_by("node__hostname")
    return cluster, list(members)


def cluster_summary(cluster: Cluster, members: list[Allocation]) -> dict[str, Any]:
    """The cluster as one rental: its nodes' shared facts, and their state when they agree."""
    states = {m.state for m in members}
    first = members[0]
    return {
        "id": cluster.pk, "team": cluster.team_id, "gpu_model": cluster.gpu_model.slug,
        "node_count": cluster.node_count, "gpu_count": sum(m.gpu_count for m in members),
        "network_group": cluster.network_group, "fabric": first.node.fabric,
        "region": first.node.region.slug,
        "state": states.pop() if len(states) == 1 else "mixed",
        "paid_from": first.paid_from, "paid_until": max(m.paid_until for m in members),
        "quote": cluster.quote_id, "created_at": cluster.created_at, "allocations": members,
    }  # fmt: skip


def allocation_for_action(*, acting: Acting, pk: UUID) -> Allocation | None:
    """The allocation to act on, None where they may not read it, or the refusal of
    `allocation_act_check` where they may read it only. Pages and API alike."""
    allocation = allocation_get(acting=acting, pk=pk)
    if allocation is not None:
        allocation_act_check(acting=acting, allocation=allocation)
    return allocation


def may_act_on(*, acting: Acting, allocation: Allocation) -> bool:
    return allocation.team_id == acting.team.pk and acting.can(Action.ACT)


def allocation_act_check(*, acting: Acting, allocation: Allocation) -> None:
    """Refuse acting on an allocation they may read only: another team's (ReadOnly: staff
    read every team's and change none), or their team's in a role that does not act."""
    if allocation.team_id != acting.team.pk:
        raise ReadOnly
    acting.require(Action.ACT)


def team_of_rental(model: type[Allocation | Cluster | Quote], *, pk: UUID) -> int | None:
    """The team whose allocation, cluster or quote `pk` is, whoever asks: only to find which
    of a person's teams to read it as (accounts.roles.acting_for_team_of), never shown."""
    team: int | None = model.objects.filter(pk=pk).values_list("team_id", flat=True).first()
    return team


# What a credit note reads (rentals.services.credits), loaded with the allocation: the staff
# page's list and the service's locked row alike, so a note costs no query of its own.
CREDIT_PREFETCH = (
    "quote__lines",
    "extension_quotes__lines",
    "extension_quotes__period",
    "impaired_spans__credits",
    "ledger",
)


class Impaired(TypedDict):
    """What `impaired_allocations` sets on each allocation."""

    spans: list[ImpairedSpan]
    credited: set[int]


def impaired_allocations(*, limit: int = 100) -> "list[WithAnnotations[Allocation, Impaired]]":
    """Allocations marked impaired now or with impaired time not yet credited (staff's
    remedies page), the longest impaired first; each with `spans` (its spans, oldest
    first) and `credited` (the ids of the spans already credited)."""
    spans = ImpairedSpan.objects.counted().filter(
        Q(ended_at__isnull=True) | Q(credits__isnull=True)
    )
    # Each allocation gets the attributes `Impaired` names below, before it is returned.
    found = cast(
        "list[WithAnnotations[Allocation, Impaired]]",
        list(
            Allocation.objects.filter(pk__in=spans.values("allocation_id"))
            .select_related("gpu_model", "node", "user", "team", "quote__period")
            .prefetch_related(*CREDIT_PREFETCH)
            .order_by(F("impaired_since").asc(nulls_last=True), "pk")[:limit]
        ),
    )
    for allocation in found:
        allocation.spans = sorted(
            (s for s in allocation.impaired_spans.all() if span_counts(s)),
            key=lambda s: s.started_at,
        )
        allocation.credited = {s.pk for s in allocation.spans if s.credits.all()}
    return found
