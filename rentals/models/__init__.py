from rentals.models.allocations import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationState,
    IdempotencyKey,
    LedgerEntry,
    LedgerKind,
    Quote,
    QuoteLine,
    QuoteLineKind,
)
from rentals.models.telemetry import Flag, FlagKind, GpuRollup, GpuSample, Poll, PollOutcome

__all__ = [
    "Allocation",
    "AllocationEvent",
    "AllocationGpu",
    "AllocationState",
    "Flag",
    "FlagKind",
    "GpuRollup",
    "GpuSample",
    "IdempotencyKey",
    "LedgerEntry",
    "LedgerKind",
    "Poll",
    "PollOutcome",
    "Quote",
    "QuoteLine",
    "QuoteLineKind",
]
