"""What every allocation change records, and how a lost race is told apart."""

from collections.abc import Iterable
from datetime import datetime

from django.contrib.auth.models import User
from django.utils.translation import gettext as _

from core.db import Retry, sqlstate
from core.errors import DomainError
from rentals.errors import NoCapacity
from rentals.models import Allocation, AllocationEvent, LedgerEntry
from rentals.signals import allocation_events_recorded, ledger_entries_recorded

EXCLUSION_VIOLATION = "23P01"


def event_record(
    allocation: Allocation,
    *,
    kind: str,
    at: datetime,
    actor: User | None = None,
    from_state: str = "",
    to_state: str = "",
    note: str = "",
) -> AllocationEvent:
    return events_record(
        [allocation], kind=kind, actor=actor, from_state=from_state, to_state=to_state,
        note=note, at=at,
    )[0]  # fmt: skip


def events_record(
    allocations: Iterable[Allocation],
    *,
    kind: str,
    at: datetime,
    actor: User | None = None,
    from_state: str = "",
    to_state: str = "",
    note: str = "",
) -> list[AllocationEvent]:
    """The same change of several allocations (a cluster's), in one statement, announced
    once (rentals.signals)."""
    events = AllocationEvent.objects.bulk_create(
        AllocationEvent(
            allocation=allocation, at=at, actor=actor, kind=kind,
            from_state=from_state, to_state=to_state, note=note,
        )
        for allocation in allocations
    )  # fmt: skip
    events_announce(events)
    return events


def events_announce(events: list[AllocationEvent]) -> None:
    """Tell the listeners (webhooks) of events just written, once for all of them."""
    allocation_events_recorded.send(
        sender=AllocationEvent,
        event_ids=[event.pk for event in events],
        team_ids={event.allocation.team_id for event in events},
    )


def ledger_announce(entry_ids: list[int], *, charges_only: bool = False) -> None:
    """Tell the listeners (invoices) of ledger rows just written: charges, refunds, credits
    (`charges_only` where the caller knows they are all charges). Called as the
    transaction's last write where it can be, so that an invoice number a listener takes is
    held only until the commit."""
    if entry_ids:
        ledger_entries_recorded.send(
            sender=LedgerEntry, entry_ids=list(entry_ids), charges_only=charges_only
        )


def raise_if_lost_race(exc: BaseException, final: DomainError | None = None) -> None:
    """Another booking took the GPUs between our read and our insert: run the whole
    transaction again (core.db.retried_transaction); after the last try, `final` (no
    capacity, with the earliest start where the caller knows it)."""
    if sqlstate(exc) == EXCLUSION_VIOLATION:
        final = final or NoCapacity(_("The GPUs were just taken by another booking."))
        raise Retry(final) from exc
