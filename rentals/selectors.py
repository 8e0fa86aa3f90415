"""Reads of rentals: what a user may see (the owner check), quotes, the ledger."""

from datetime import datetime
from decimal import Decimal

from django.db.models import Case, DecimalField, F, Prefetch, QuerySet, Sum, When

from catalog.models import OptionBilling
from core.money import DECIMAL_PLACES, MAX_DIGITS
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationGpu,
    AllocationState,
    LedgerEntry,
    LedgerKind,
    Quote,
)


def _can_see_all(user) -> bool:
    return user.is_staff


def allocation_list_for_user(*, user, state: str | None = None) -> QuerySet[Allocation]:
    """Customers see their own; staff see every allocation (read-only)."""
    qs = Allocation.objects.all() if _can_see_all(user) else Allocation.objects.filter(user=user)
    if state:
        qs = qs.filter(state=state)
    return qs.select_related(
        "gpu_model", "node", "node__region", "period", "user"
    ).prefetch_related(
        Prefetch(
            "held",
            queryset=AllocationGpu.objects.select_related("gpu").order_by("gpu__index"),
        ),
        Prefetch(
            "events", queryset=AllocationEvent.objects.select_related("actor").order_by("at", "id")
        ),
    )


def allocation_get_for_user(*, user, pk) -> Allocation | None:
    return allocation_list_for_user(user=user).filter(pk=pk).first()


def allocation_get_for_owner(*, user, pk) -> tuple[Allocation | None, bool]:
    """(allocation the user may read, whether they may act on it): staff read every
    allocation and change none. The one owner check of pages and API alike."""
    allocation = allocation_get_for_user(user=user, pk=pk)
    return allocation, allocation is not None and allocation.user_id == user.pk


def gpu_states_at(at: datetime) -> dict[int, str]:
    """{gpu id: "running" | "stopped"} for GPUs held by a live allocation at `at`."""
    return dict(
        AllocationGpu.objects.filter(
            released=False,
            starts_at__lte=at,
            ends_at__gt=at,
            allocation__state__in=[AllocationState.RUNNING, AllocationState.STOPPED],
        ).values_list("gpu_id", "allocation__state")
    )


def quote_get_for_user(*, user, pk) -> Quote | None:
    return (
        Quote.objects.filter(user=user, pk=pk)
        .select_related("gpu_model", "period")
        .prefetch_related("lines__option")
        .first()
    )


def quote_options(*, quote: Quote) -> list[tuple]:
    """[(option, quantity)] as the customer chose them: option lines store quantity × periods
    for per-period options, so divide that back out."""
    return [
        (
            line.option,
            line.quantity
            // (quote.period_count if line.option.billing == OptionBilling.PER_PERIOD else 1),
        )
        for line in quote.lines.all()
        if line.option_id
    ]


def ledger_for_user(*, user) -> QuerySet[LedgerEntry]:
    return LedgerEntry.objects.filter(user=user).select_related(
        "allocation", "allocation__gpu_model"
    )


def ledger_balance(*, user):
    """Charges minus refunds, exact."""
    total = LedgerEntry.objects.filter(user=user).aggregate(
        total=Sum(
            Case(
                When(kind=LedgerKind.REFUND, then=-F("amount")),
                default=F("amount"),
                output_field=DecimalField(max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES),
            )
        )
    )["total"]
    return total if total is not None else Decimal("0.00")


STATEMENT_HEADER = ["date_utc", "kind", "description", "amount", "currency", "allocation"]


def statement_rows(*, user):
    """The statement as CSV rows: refunds negative, so a column sum is the net charged."""
    for entry in ledger_for_user(user=user).iterator():
        yield [
            entry.at.isoformat(),
            entry.kind,
            entry.description,
            entry.signed_amount,
            entry.currency,
            entry.allocation_id,
        ]
