"""Reads of a team's billing and of what staff watch."""

from typing import Any

from django.db.models import Count, Q, Sum

from accounts.models import BillingMode, Team, TeamCreditLimit
from accounts.roles import Acting, Action
from invoices.models import Invoice, InvoiceKind
from invoices.selectors import invoice_today
from payments.models import (
    BankTransfer,
    Card,
    CashEntry,
    CashKind,
    Payment,
    PaymentState,
    TransferState,
)
from payments.services import cash_balances, invoices_overdue


def team_billing(*, acting: Acting) -> dict[str, Any]:
    """GET /api/v1/teams/{id}/billing/ and the team page's billing box."""
    acting.require(Action.READ_TEAM)
    team = acting.team
    return {
        "team": team.pk,
        "mode": team.billing_mode,
        "balances": cash_balances(team=team),
        "credit_limits": [
            {"currency": limit.currency, "amount": limit.amount}
            for limit in TeamCreditLimit.objects.filter(team=team)
        ],
        "payment_terms_days": team.payment_terms_days,
        "grace_days": team.grace_days,
        "cards": list(Card.objects.filter(team=team, removed_at=None)),
        "overdue": [i.display_number for i in invoices_overdue(team=team)]
        if team.billing_mode == BillingMode.INVOICED
        else [],
    }


def payments_overview() -> dict[str, Any]:
    """What staff watch: payments by state, refunds, unmatched transfers, failed captures."""
    states = dict(Payment.objects.values_list("state").annotate(n=Count("id")))
    refunds = CashEntry.objects.filter(kind=CashKind.REFUNDED)
    return {
        "payments": {state.label: states.get(state.value, 0) for state in PaymentState},
        "capture_failed": list(
            Payment.objects.filter(
                Q(state=PaymentState.CAPTURE_FAILED)
                | Q(state=PaymentState.BOOKED, capture_attempts__gt=0)
            ).select_related("team")[:100]
        ),
        "recent_payments": list(
            CashEntry.objects.filter(kind=CashKind.RECEIVED)
            .select_related("team")
            .order_by("-at", "-id")[:50]
        ),
        "refunds": list(refunds.select_related("team").order_by("-at", "-id")[:50]),
        "refunded_total": list(
            refunds.values("currency").annotate(total=Sum("amount")).order_by("currency")
        ),
        "unmatched": list(
            BankTransfer.objects.filter(state=TransferState.UNMATCHED).order_by("booked_on", "id")[
                :200
            ]
        ),
    }


def teams_overdue() -> list[tuple[Team, list[Invoice]]]:
    """(team, its overdue invoices) for every invoiced team with one: the staff page, the
    reminders and /metrics."""
    candidates = (
        Invoice.objects.filter(
            kind=InvoiceKind.INVOICE,
            due_on__lt=invoice_today(),
            team__billing_mode=BillingMode.INVOICED,
        )
        .values_list("team_id", flat=True)
        .distinct()
    )
    found = []
    for team in Team.objects.filter(pk__in=candidates).order_by("name"):
        overdue = invoices_overdue(team=team)
        if overdue:
            found.append((team, overdue))
    return found
