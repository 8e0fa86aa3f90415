"""A team's optional monthly spend limit, checked inside the purchase's transaction."""

from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import Case, DecimalField, F, Sum, When
from django.utils.translation import gettext as _

from accounts.models import Team
from core.money import DECIMAL_PLACES, MAX_DIGITS, money_text, quantize
from rentals.errors import SpendLimitReached
from rentals.models import CREDITS, LedgerEntry


def month_bounds(at: datetime) -> tuple[datetime, datetime]:
    start = at.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start, (start + timedelta(days=32)).replace(day=1)


def month_spend(*, team: Team, currency: str, at: datetime) -> Decimal:
    """Net charged to the team in `at`'s calendar month (UTC): charges minus refunds."""
    signed = Case(
        When(kind__in=CREDITS, then=-F("amount")),
        default=F("amount"),
        output_field=DecimalField(max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES),
    )
    # The whole month, not "up to now": a parallel purchase that committed while we waited
    # for the team's lock may carry a timestamp a moment after ours.
    start, end = month_bounds(at)
    total = LedgerEntry.objects.filter(
        team=team, currency=currency, at__gte=start, at__lt=end
    ).aggregate(total=Sum(signed))["total"]
    return total or Decimal("0")


def spend_limit_check(*, team: Team, amount: Decimal, currency: str, at: datetime) -> None:
    """Refuse a charge that would take the month past the team's limit. The team row is
    locked (only when a limit is set), so parallel purchases are counted one after another."""
    locked = (
        Team.objects.select_for_update()
        .filter(pk=team.pk, monthly_spend_limit__isnull=False)
        .first()
    )
    if locked is None:
        return
    spent = month_spend(team=locked, currency=currency, at=at)
    if spent + amount > locked.monthly_spend_limit:
        raise SpendLimitReached(
            _(
                "This charge of %(amount)s would pass %(team)s's monthly limit of "
                "%(limit)s: %(spent)s is spent this month."
            )
            % {
                "amount": money_text(amount, currency),
                "team": locked.name,
                "limit": money_text(locked.monthly_spend_limit, currency),
                "spent": money_text(spent, currency),
            },
            extra={
                "limit": str(quantize(locked.monthly_spend_limit, currency)),
                "month_spend": str(quantize(spent, currency)),
                "currency": currency,
            },
        )
