from rentals.models.allocations import (
    LIVE_STATES,
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationKey,
    AllocationState,
    Cluster,
    EventKind,
)
from rentals.models.edges import HoldingEdge
from rentals.models.exports import IN_FLIGHT, ExportState, StatementExport, StatementExportPart
from rentals.models.idempotency import IdempotencyKey
from rentals.models.impairments import ImpairedSpan, impaired_minimum, span_counts
from rentals.models.ledger import CREDITS, LedgerEntry, LedgerKind, LedgerReason
from rentals.models.maintenance import MaintenanceWindow
from rentals.models.notices import (
    MAINTENANCE_NOTICES,
    RECEIPTS,
    SPAN_NOTICES,
    Notice,
    NoticeKind,
)
from rentals.models.quotes import Quote, QuoteKind, QuoteLine, QuoteLineKind
from rentals.models.summary import (
    BookedAheadDay,
    CapacityBucket,
    CapacityChange,
    CapacityDay,
    CapacityNode,
    CapacityNodeDays,
    CapacitySummary,
)

__all__ = [
    "BookedAheadDay",
    "CapacityBucket",
    "CapacityChange",
    "CapacityDay",
    "CapacityNode",
    "CapacityNodeDays",
    "CapacitySummary",
    "CREDITS",
    "LIVE_STATES",
    "SPAN_NOTICES",
    "ImpairedSpan",
    "MAINTENANCE_NOTICES",
    "Allocation",
    "HoldingEdge",
    "AllocationEvent",
    "AllocationGpu",
    "AllocationKey",
    "AllocationState",
    "Cluster",
    "EventKind",
    "ExportState",
    "IN_FLIGHT",
    "StatementExport",
    "StatementExportPart",
    "IdempotencyKey",
    "LedgerEntry",
    "LedgerKind",
    "LedgerReason",
    "MaintenanceWindow",
    "Notice",
    "RECEIPTS",
    "NoticeKind",
    "Quote",
    "QuoteKind",
    "QuoteLine",
    "QuoteLineKind",
    "impaired_minimum",
    "span_counts",
]
