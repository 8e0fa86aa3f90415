"""Reads of quotes, for an acting team: a quote, what became of it, its options."""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from accounts.roles import Acting
from catalog.models import Option
from rentals.models import (
    Allocation,
    Quote,
)


def quote_get(*, acting: Acting, pk: UUID) -> Quote | None:
    return (
        Quote.objects.filter(team=acting.team, pk=pk)
        .select_related("gpu_model", "period", "region")
        .prefetch_related("lines__option")
        .first()
    )


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


def quote_options(*, quote: Quote) -> list[tuple[Option, int]]:
    """[(option, quantity)] as the customer chose them."""
    return [(line.option, line.count) for line in quote.lines.all() if line.option is not None]
