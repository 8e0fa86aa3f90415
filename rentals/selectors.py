"""Reads of rentals, each for an acting person and team (accounts.access): what they may
see and act on, quotes, the ledger; and a person's notices."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal

from django.db.models import (
    Case,
    CharField,
    Count,
    DecimalField,
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

from accounts.access import Acting, Action
from catalog.models import RentalPeriod
from core.money import DECIMAL_PLACES, MAX_DIGITS, Money, quantize
from core.pagination import SortKey, keyset_filter
from rentals.errors import ReadOnly
from rentals.models import (
    CREDITS,
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationState,
    Cluster,
    ImpairedSpan,
    LedgerEntry,
    LedgerKind,
    MaintenanceWindow,
    Notice,
    Quote,
    span_counts,
)
from rentals.texts import ledger_text


def allocation_list(
    *, acting: Acting, state: str | None = None, filters: dict | None = None
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


_SIGNED = Case(  # what the customer paid: charges add, refunds and credits take away
    When(kind__in=CREDITS, then=-F("amount")),
    default=F("amount"),
    output_field=DecimalField(max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES),
)


_LIST_RANK = Case(
    When(state=AllocationState.RUNNING, then=Value(0)),
    When(state=AllocationState.STOPPED, then=Value(1)),
    When(state=AllocationState.SCHEDULED, then=Value(2)),
    default=Value(3),
    output_field=IntegerField(),
)


def allocations_as_listed(qs: QuerySet[Allocation]) -> QuerySet[Allocation]:
    """What runs first: running, then stopped, then scheduled (soonest first), then the
    rest (newest first); each with what it paid (`paid`, `paid_currency`: its charges less
    its refunds and credits; null for a cluster member whose cluster's rows sit on another)."""
    own = LedgerEntry.objects.filter(allocation=OuterRef("pk")).order_by().values("allocation")
    return qs.annotate(
        list_rank=_LIST_RANK,
        starts_soon=_STARTS_SOON,
        paid=Subquery(own.annotate(total=Sum(_SIGNED)).values("total")[:1]),
        paid_currency=Subquery(own.values("currency")[:1], output_field=CharField()),
    ).order_by(*_LIST_ORDER)


_STARTS_SOON = Case(When(state=AllocationState.SCHEDULED, then=F("paid_from")))
_LIST_ORDER = ("list_rank", F("starts_soon").asc(nulls_last=True), "-paid_from", "pk")


def allocations_ranked(qs: QuerySet[Allocation]) -> QuerySet[Allocation]:
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


def allocation_key(allocation: Allocation) -> tuple:
    return allocation.list_rank, allocation.starts_soon, allocation.paid_from, allocation.pk


def allocations_counted(
    qs: QuerySet[Allocation], *, before: tuple | None = None
) -> tuple[int, int]:
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


def allocation_get(*, acting: Acting, pk) -> Allocation | None:
    return allocation_list(acting=acting).filter(pk=pk).first()


def cluster_get(*, acting: Acting, pk) -> tuple[Cluster | None, list[Allocation]]:
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


def cluster_summary(cluster: Cluster, members: list[Allocation]) -> dict:
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


def allocation_for_action(*, acting: Acting, pk) -> Allocation | None:
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


# Timestamps have a resolution of a microsecond, in PostgreSQL as in Python: an instant is
# the window of one microsecond.
INSTANT = timedelta(microseconds=1)


def holdings_overlapping(*, starts_at: datetime, ends_at: datetime) -> QuerySet[AllocationGpu]:
    """The live (unreleased) holdings that overlap [starts_at, ends_at): a GPU is free for
    the window when none of them holds it. The same rule as the SQL clause
    `rentals.sql.holdings.gpu_free` (and `gpu_held`), which placement and availability use; the
    exclusion constraint `rentals_allocationgpu_no_overlap` guards it."""
    return AllocationGpu.objects.filter(
        released=False, starts_at__lt=ends_at, ends_at__gt=starts_at
    )


def maintenance_list() -> QuerySet[MaintenanceWindow]:
    """Maintenance windows, the latest first, with the GPUs each holds (staff)."""
    return MaintenanceWindow.objects.select_related("created_by").prefetch_related(
        Prefetch(
            "held",
            queryset=AllocationGpu.objects.select_related("gpu__node").order_by(
                "gpu__node__hostname", "gpu__index"
            ),
        )
    )


def maintenance_get(*, pk) -> MaintenanceWindow | None:
    return maintenance_list().filter(pk=pk).first()


def node_neighbours(*, allocation: Allocation, at: datetime) -> int:
    """How many of the allocation's node's GPUs other teams' allocations hold at `at`: the
    node is shared with other customers when this is not 0."""
    return (
        AllocationGpu.objects.filter(
            node_id=allocation.node_id, released=False, starts_at__lte=at, ends_at__gt=at,
            allocation__isnull=False,
        )
        .exclude(allocation__team_id=allocation.team_id)
        .count()
    )  # fmt: skip


def holdings_at(at: datetime) -> QuerySet[AllocationGpu]:
    """The live holdings at the instant `at` (starts_at ≤ at < ends_at): those overlapping
    the window of that one instant."""
    return holdings_overlapping(starts_at=at, ends_at=at + INSTANT)


def gpu_states_at(at: datetime) -> dict[int, str]:
    """{gpu id: "running" | "stopped"} for GPUs held by a live allocation at `at`."""
    return dict(
        holdings_at(at)
        .filter(allocation__state__in=[AllocationState.RUNNING, AllocationState.STOPPED])
        .values_list("gpu_id", "allocation__state")
    )


def quote_get(*, acting: Acting, pk) -> Quote | None:
    return (
        Quote.objects.filter(team=acting.team, pk=pk)
        .select_related("gpu_model", "period", "region")
        .prefetch_related("lines__option")
        .first()
    )


def team_of_rental(model, *, pk) -> int | None:
    """The team whose allocation, cluster or quote `pk` is, whoever asks: only to find which
    of a person's teams to read it as (accounts.access.acting_for_team_of), never shown."""
    return model.objects.filter(pk=pk).values_list("team_id", flat=True).first()


@dataclass(frozen=True)
class QuoteOutcome:
    """What became of a quote: the allocation it booked (the first node of a cluster), or
    for an extension quote the allocation it extended; else whether it expired."""

    allocation: Allocation | None
    extended: bool
    expired: bool


def quote_outcome(*, quote: Quote, now: datetime) -> QuoteOutcome:
    if quote.extends_id:
        if quote.used_at is not None:
            return QuoteOutcome(allocation=quote.extends, extended=True, expired=False)
    else:
        booked = quote.allocations.order_by("node__hostname", "pk").first()
        if booked is not None:
            return QuoteOutcome(allocation=booked, extended=False, expired=False)
    return QuoteOutcome(allocation=None, extended=False, expired=quote.valid_until <= now)


def quote_options(*, quote: Quote) -> list[tuple]:
    """[(option, quantity)] as the customer chose them."""
    return [(line.option, line.count) for line in quote.lines.all() if line.option_id]


def ledger_entries(*, acting: Acting, filters: dict | None = None) -> QuerySet[LedgerEntry]:
    """The team's ledger, newest first; `filters` may bound it by date (`since` and `until`,
    both inclusive days in UTC) and kind."""
    acting.require(Action.READ_LEDGER)
    qs = LedgerEntry.objects.filter(team=acting.team)
    filters = filters or {}
    if filters.get("since"):
        qs = qs.filter(at__gte=datetime.combine(filters["since"], time.min, tzinfo=UTC))
    if filters.get("until"):
        end = datetime.combine(filters["until"] + timedelta(days=1), time.min, tzinfo=UTC)
        qs = qs.filter(at__lt=end)
    if filters.get("kind"):
        qs = qs.filter(kind=filters["kind"])
    return qs.select_related(
        "allocation__gpu_model", "allocation__period", "allocation__cluster", "impaired_span"
    )


# The statement's order (LedgerEntry.Meta.ordering) as a keyset; the index
# rentals_ledger_team_at_id reads a page from its key and, covering kind, currency and
# amount, the balances without the table.
LEDGER_ORDER = (SortKey("at", descending=True), SortKey("id", descending=True))


@dataclass(frozen=True)
class LedgerSummary:
    """What the filtered entries add up to, exact: the balance per currency, how many rows
    there are, and how many of them come before a key (newer, on the statement)."""

    balances: list[Money]
    rows: int
    before: int

    @property
    def balance(self):
        """The balance when there is one currency (0 when none), else None: there is no
        single number for several currencies."""
        if not self.balances:
            return Decimal("0.00")
        return self.balances[0].amount if len(self.balances) == 1 else None


def ledger_summary(
    *, acting: Acting, filters: dict | None = None, before: tuple | None = None
) -> LedgerSummary:
    """Balances per currency, the row count and the rows newer than `before` (a key of
    LEDGER_ORDER), over the filtered entries, in one statement."""
    rows = (
        ledger_entries(acting=acting, filters=filters)
        .order_by()
        .values("currency")
        .annotate(
            total=Sum(_SIGNED),
            rows=Count("pk"),
            before=Count("pk", filter=keyset_filter(LEDGER_ORDER, before, forward=False))
            if before
            else Value(0),
        )
        .order_by("currency")
    )
    rows = list(rows)
    return LedgerSummary(
        balances=[Money(row["total"], row["currency"]) for row in rows],
        rows=sum(row["rows"] for row in rows),
        before=sum(row["before"] for row in rows),
    )


def ledger_balances(*, acting: Acting, filters: dict | None = None) -> list[Money]:
    """Charges minus refunds and credits, exact, one Money per currency (amounts of
    different currencies are never added), over the filtered entries when filters are given."""
    return ledger_summary(acting=acting, filters=filters).balances


# `amount` is the gross; net and VAT were added after it (columns are added, never moved).
STATEMENT_HEADER = [
    "date_utc", "kind", "description", "amount", "currency", "allocation", "net", "vat",
]  # fmt: skip


_STATEMENT_COLUMNS = (
    "at", "kind", "reason", "amount", "currency", "allocation_id", "net", "vat", "period_count",
    "impaired_span__started_at", "impaired_span__ended_at", "allocation__gpu_count",
    "allocation__gpu_model__name", "allocation__period_id", "allocation__cluster__node_count",
)  # fmt: skip


def statement_rows(*, acting: Acting, filters: dict | None = None) -> Iterator[list]:
    """The statement as CSV rows: refunds negative, so a column sum is the net charged. The
    role is checked here, before the first row streams (a refusal after the status line had
    gone out would be a 200).

    Read as plain values, not model instances (five per row with its allocation's), and each
    description written once per distinct set of facts: a million-row statement streams at
    the database's pace."""
    rows = ledger_entries(acting=acting, filters=filters).values_list(*_STATEMENT_COLUMNS)
    return _statement_lines(rows.iterator(chunk_size=2000))


def _statement_lines(rows) -> Iterator[list]:
    periods = {p.pk: p for p in RentalPeriod.objects.all()}
    words: dict[tuple, str] = {}
    for row in rows:
        at, kind, reason, amount, currency, allocation, net, vat, count, *facts = row
        text = words.get(key := (reason, count, *facts))
        if text is None:
            span_from, span_until, gpus, model, period, nodes = facts
            text = words[key] = ledger_text(
                reason, period_count=count, span=(span_from, span_until), gpu_count=gpus,
                model=model, period=periods.get(period), cluster_nodes=nodes or 0,
            )  # fmt: skip
        gross, net, vat = (quantize(v, currency) for v in (amount, net, vat))
        if kind != LedgerKind.CHARGE:  # negative, as LedgerEntry.signed_amount
            gross, net, vat = -gross, -net, -vat
        yield [at.isoformat(), kind, text, gross, currency, allocation, net, vat]


def _with_facts(notices):
    return notices.select_related(
        "user",
        "allocation__gpu_model",
        "allocation__node",
        "allocation__quote",
        "quote__gpu_model",
        "quote__period",
        "maintenance",
    ).prefetch_related("quote__lines__option")


def notices_for(*, user, limit: int = 50):
    return _with_facts(Notice.objects.filter(user=user)).order_by("-created_at")[:limit]


def notices_unread_count(*, user) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).count()


def notice_get(*, pk) -> Notice:
    """One notice with the facts its words are made of (rentals.texts)."""
    return _with_facts(Notice.objects).get(pk=pk)


# What a credit note reads (rentals.services.credits), loaded with the allocation: the staff
# page's list and the service's locked row alike, so a note costs no query of its own.
CREDIT_PREFETCH = (
    "quote__lines",
    "extension_quotes__lines",
    "extension_quotes__period",
    "impaired_spans__credits",
    "ledger",
)


def impaired_allocations(*, limit: int = 100) -> list[Allocation]:
    """Allocations marked impaired now or with impaired time not yet credited (staff's
    remedies page), the longest impaired first; each with `spans` (its spans, oldest
    first) and `credited` (the ids of the spans already credited)."""
    spans = ImpairedSpan.objects.counted().filter(
        Q(ended_at__isnull=True) | Q(credits__isnull=True)
    )
    found = list(
        Allocation.objects.filter(pk__in=spans.values("allocation_id"))
        .select_related("gpu_model", "node", "user", "team", "quote__period")
        .prefetch_related(*CREDIT_PREFETCH)
        .order_by(F("impaired_since").asc(nulls_last=True), "pk")[:limit]
    )
    for allocation in found:
        allocation.spans = sorted(
            (s for s in allocation.impaired_spans.all() if span_counts(s)),
            key=lambda s: s.started_at,
        )
        allocation.credited = {s.pk for s in allocation.spans if s.credits.all()}
    return found
