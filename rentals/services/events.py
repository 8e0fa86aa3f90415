"""What every allocation change records, and how a lost race is told apart."""

from django.utils import timezone
from django.utils.translation import gettext as _

from core.db import Retry, sqlstate
from rentals.errors import NoCapacity
from rentals.models import AllocationEvent

EXCLUSION_VIOLATION = "23P01"


def event_record(allocation, *, kind, actor=None, from_state="", to_state="", note="", at=None):
    return AllocationEvent.objects.create(
        allocation=allocation,
        at=at or timezone.now(),
        actor=actor,
        kind=kind,
        from_state=from_state,
        to_state=to_state,
        note=note,
    )


def raise_if_lost_race(exc, final: NoCapacity | None = None) -> None:
    """Another booking took the GPUs between our read and our insert: run the whole
    transaction again (core.db.retried_transaction); after the last try, `final` (no
    capacity, with the earliest start where the caller knows it)."""
    if sqlstate(exc) == EXCLUSION_VIOLATION:
        final = final or NoCapacity(_("The GPUs were just taken by another booking."))
        raise Retry(final) from exc
