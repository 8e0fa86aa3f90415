"""Reads of a team's ledger: its entries, summary and balances, and the statement's CSV rows."""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import (
    Case,
    Count,
    DecimalField,
    F,
    QuerySet,
    Sum,
    Value,
    When,
)

from accounts.roles import Acting, Action
from catalog.models import RentalPeriod
from core.db import streamed
from core.money import DECIMAL_PLACES, MAX_DIGITS, Money, quantize
from core.pagination import Key, SortKey, keyset_filter
from rentals.models import (
    CREDITS,
    LedgerEntry,
    LedgerKind,
)
from rentals.texts import ledger_text

SIGNED_AMOUNT = Case(  # what the customer paid: charges add, refunds and credits take away
    When(kind__in=CREDITS, then=-F("amount")),
    default=F("amount"),
    output_field=DecimalField(max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES),
)


def ledger_entries(
    *, acting: Acting, filters: Mapping[str, Any] | None = None
) -> QuerySet[LedgerEntry]:
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
    def balance(self) -> Decimal | None:
        """The balance when there is one currency (0 when none), else None: there is no
        single number for several currencies."""
        if not self.balances:
            return Decimal("0.00")
        return self.balances[0].amount if len(self.balances) == 1 else None


def ledger_summary(
    *, acting: Acting, filters: Mapping[str, Any] | None = None, before: Key | None = None
) -> LedgerSummary:
    """Balances per currency, the row count and the rows newer than `before` (a key of
    LEDGER_ORDER), over the filtered entries, in one statement."""
    totals = (
        ledger_entries(acting=acting, filters=filters)
        .order_by()
        .values("currency")
        .annotate(
            total=Sum(SIGNED_AMOUNT),
            rows=Count("pk"),
            before=Count("pk", filter=keyset_filter(LEDGER_ORDER, before, forward=False))
            if before
            else Value(0),
        )
        .order_by("currency")
    )
    rows = list(totals)
    return LedgerSummary(
        balances=[Money(row["total"], row["currency"]) for row in rows],
        rows=sum(row["rows"] for row in rows),
        before=sum(row["before"] for row in rows),
    )


def ledger_balances(*, acting: Acting, filters: Mapping[str, Any] | None = None) -> list[Money]:
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


def statement_rows(
    *, acting: Acting, filters: Mapping[str, Any] | None = None
) -> Iterator[list[Any]]:
    """The statement as CSV rows: refunds negative, so a column sum is the net charged. The
    role is checked here, before the first row streams (a refusal after the status line had
    gone out would be a 200).

    Read as plain values, not model instances (five per row with its allocation's), and each
    description written once per distinct set of facts: a million-row statement streams at
    the database's pace."""
    rows = ledger_entries(acting=acting, filters=filters).values_list(*_STATEMENT_COLUMNS)
    return _statement_lines(streamed(rows))


def _statement_lines(rows: Iterable[tuple[Any, ...]]) -> Iterator[list[Any]]:
    periods = {p.pk: p for p in RentalPeriod.objects.all()}
    words: dict[tuple[Any, ...], str] = {}
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
