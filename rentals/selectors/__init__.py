"""Reads of rentals, one module per thing read: `allocations` (and clusters, for an acting
person and team, accounts.roles), `holdings` (which GPUs are held when; maintenance
windows), `quotes`, `ledger` (and the statement), `notices`, `availability` (what is free
when, where a request fits), `allocation_usage` (one allocation's paid time against its
use) and `catalog` (the catalog list's read model). The first five's names are also read
from this package (`selectors.allocation_get`); the last three are imported by module."""

from rentals.selectors.allocations import (
    ALLOCATION_ORDER,
    CREDIT_PREFETCH,
    allocation_act_check,
    allocation_for_action,
    allocation_get,
    allocation_key,
    allocation_list,
    allocations_as_listed,
    allocations_counted,
    allocations_ranked,
    cluster_get,
    cluster_summary,
    impaired_allocations,
    may_act_on,
    team_of_rental,
)
from rentals.selectors.holdings import (
    INSTANT,
    gpu_states_at,
    holdings_at,
    holdings_overlapping,
    maintenance_get,
    maintenance_list,
    node_neighbours,
)
from rentals.selectors.ledger import (
    LEDGER_ORDER,
    SIGNED_AMOUNT,
    STATEMENT_HEADER,
    LedgerSummary,
    ledger_balances,
    ledger_entries,
    ledger_summary,
    statement_rows,
)
from rentals.selectors.notices import (
    notice_get,
    notices_for,
    notices_unread_count,
)
from rentals.selectors.quotes import (
    QuoteOutcome,
    quote_get,
    quote_options,
    quote_outcome,
)

__all__ = [
    "ALLOCATION_ORDER",
    "CREDIT_PREFETCH",
    "INSTANT",
    "LEDGER_ORDER",
    "LedgerSummary",
    "QuoteOutcome",
    "SIGNED_AMOUNT",
    "STATEMENT_HEADER",
    "allocation_act_check",
    "allocation_for_action",
    "allocation_get",
    "allocation_key",
    "allocation_list",
    "allocations_as_listed",
    "allocations_counted",
    "allocations_ranked",
    "cluster_get",
    "cluster_summary",
    "gpu_states_at",
    "holdings_at",
    "holdings_overlapping",
    "impaired_allocations",
    "ledger_balances",
    "ledger_entries",
    "ledger_summary",
    "maintenance_get",
    "maintenance_list",
    "may_act_on",
    "node_neighbours",
    "notice_get",
    "notices_for",
    "notices_unread_count",
    "quote_get",
    "quote_options",
    "quote_outcome",
    "statement_rows",
    "team_of_rental",
]
