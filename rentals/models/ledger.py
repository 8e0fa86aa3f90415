"""The ledger: money moved for a customer, one row per charge or refund."""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from core.db import choices_check
from core.money import CurrencyField, MoneyField, quantize
from rentals.models.allocations import Allocation


class LedgerKind(models.TextChoices):
    CHARGE = "charge", _("charge")
    REFUND = "refund", _("refund")
    CREDIT = "credit", _("credit")


class LedgerReason(models.TextChoices):
    BOOKING = "booking", _("booking")
    EXTENSION = "extension", _("extension")
    CANCELLATION = "cancellation", _("cancellation")
    IMPAIRMENT = "impairment", _("impaired time")


# Kinds that give money back: negative in balances and statements.
CREDITS = (LedgerKind.REFUND, LedgerKind.CREDIT)


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class LedgerEntry(models.Model):  # type: ignore[django-manager-missing]
    """Money moved for a customer. Amounts are never negative; the kind gives the sign."""

    # Indexed by `rentals_ledger_team_at_id`, which it leads.
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # Indexed by `rentals_ledger_allocation_paid`, which it leads.
    allocation = models.ForeignKey(
        Allocation, on_delete=models.PROTECT, related_name="ledger", db_index=False
    )
    # The allocation's rental period, kept on the row (a foreign key on (allocation, period),
    # rentals 0026, holds it to the allocation's): revenue per period sums a range's rows
    # from the index `rentals_ledger_at_period` alone, with no look-up each.
    period = models.ForeignKey(
        "catalog.RentalPeriod", on_delete=models.PROTECT, related_name="+", db_index=False
    )
    kind = models.CharField(max_length=10, choices=LedgerKind.choices)
    amount = MoneyField()  # gross: net + vat
    net = MoneyField()
    vat = MoneyField()
    currency = CurrencyField()
    # A charge's quote (the booking's or the extension's): its lines are the invoice's.
    quote = models.ForeignKey(
        "rentals.Quote", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # Facts, put into words in the reader's language when shown (`rentals.texts`).
    reason = models.CharField(max_length=12, choices=LedgerReason.choices)
    period_count = models.PositiveSmallIntegerField(null=True, blank=True)
    # A credit's impaired span: one credit per span, whoever clicks at once.
    impaired_span = models.ForeignKey(
        "rentals.ImpairedSpan", null=True, blank=True, on_delete=models.PROTECT,
        related_name="credits",
    )  # fmt: skip
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "ledger entries"
        constraints = [
            models.CheckConstraint(
                condition=Q(amount__gte=0), name="rentals_ledgerentry_amount_not_negative"
            ),
            models.UniqueConstraint(
                fields=["allocation"],
                condition=Q(kind=LedgerKind.REFUND),
                name="rentals_ledgerentry_one_refund",
            ),
            choices_check("kind", LedgerKind, name="rentals_ledgerentry_kind_valid"),
            choices_check("reason", LedgerReason, name="rentals_ledgerentry_reason_valid"),
            models.CheckConstraint(
                condition=Q(
                    kind=LedgerKind.CHARGE,
                    reason__in=[LedgerReason.BOOKING, LedgerReason.EXTENSION],
                    period_count__gte=1,
                )
                | Q(kind=LedgerKind.REFUND, reason=LedgerReason.CANCELLATION)
                | Q(
                    kind=LedgerKind.CREDIT,
                    reason=LedgerReason.IMPAIRMENT,
                    impaired_span__isnull=False,
                ),
                name="rentals_ledgerentry_reason_matches_kind",
            ),
            models.UniqueConstraint(
                fields=["impaired_span"],
                condition=Q(impaired_span__isnull=False),
                name="rentals_ledgerentry_one_credit_per_span",
            ),
            models.CheckConstraint(
                condition=Q(kind=LedgerKind.CREDIT) | Q(impaired_span__isnull=True),
                name="rentals_ledgerentry_span_only_on_credits",
            ),
            models.CheckConstraint(
                condition=Q(currency__regex=r"^[A-Z]{3}$"),
                name="rentals_ledgerentry_currency_is_a_code",
            ),
            models.CheckConstraint(
                condition=Q(amount=F("net") + F("vat"), net__gte=0, vat__gte=0),
                name="rentals_ledgerentry_amount_is_net_plus_vat",
            ),
            models.CheckConstraint(
                condition=Q(kind=LedgerKind.CHARGE, quote__isnull=False)
                | ~Q(kind=LedgerKind.CHARGE) & Q(quote__isnull=True),
                name="rentals_ledgerentry_charges_name_their_quote",
            ),
        ]
        indexes = [
            # The statement (rentals.selectors.ledger.LEDGER_ORDER): a page read from its key, and
            # the balances and row counts it shows from the index alone.
            models.Index(
                fields=["team", "-at", "-id"],
                include=["kind", "currency", "amount"],
                name="rentals_ledger_team_at_id",
            ),
            # What each allocation paid (rentals.selectors.allocations.allocations_as_listed, 50 a page
            # of the list) from the index alone, not from every ledger row of each.
            models.Index(
                fields=["allocation"],
                include=["kind", "currency", "amount"],
                name="rentals_ledger_allocation_paid",
            ),
            # The staff revenue's range (reports.sql.REVENUE): the rows of the range and what
            # it sums, without a pass over every row of the ledger.
            models.Index(
                fields=["at"],
                include=["kind", "currency", "net", "period"],
                name="rentals_ledger_at_period",
            ),
        ]

    def __str__(self):
        return f"{self.kind} {self.amount} {self.currency}"

    def _signed(self, amount):
        """Refunds and credits negative, at the currency's own decimals (the column keeps 4)."""
        amount = quantize(amount, self.currency)
        return amount if self.kind == LedgerKind.CHARGE else -amount

    @property
    def signed_amount(self):
        return self._signed(self.amount)

    @property
    def signed_net(self):
        return self._signed(self.net)

    @property
    def signed_vat(self):
        return self._signed(self.vat)
