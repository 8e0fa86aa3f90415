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
from rentals.models.idempotency import IdempotencyKey
from rentals.models.ledger import LedgerEntry, LedgerKind, LedgerReason
from rentals.models.maintenance import MaintenanceWindow
from rentals.models.notices import MAINTENANCE_NOTICES, RECEIPTS, Notice, NoticeKind
from rentals.models.quotes import Quote, QuoteKind, QuoteLine, QuoteLineKind

__all__ = [
    "LIVE_STATES",
    "MAINTENANCE_NOTICES",
    "Allocation",
    "AllocationEvent",
    "AllocationGpu",
    "AllocationKey",
    "AllocationState",
    "Cluster",
    "EventKind",
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
]
