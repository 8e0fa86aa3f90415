"""The ledger: money moved for a customer, one row per charge or refund."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from core.db import choices_check
from core.money import CurrencyField, MoneyField
from rentals.models.allocations import Allocation


class LedgerKind(models.TextChoices):
    CHARGE = "charge", _("charge")
    REFUND = "refund", _("refund")


class LedgerEntry(models.Model):
    """Money moved for a customer. Amounts are never negative; the kind gives the sign."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    allocation = models.ForeignKey(Allocation, on_delete=models.PROTECT, related_name="ledger")
    kind = models.CharField(max_length=10, choices=LedgerKind.choices)
    amount = MoneyField()
    currency = CurrencyField()
    description = models.CharField(max_length=200)
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
        ]
        indexes = [models.Index(fields=["team", "-at"], name="rentals_ledger_team_at")]

    def __str__(self):
        return f"{self.kind} {self.amount} {self.currency}"

    @property
    def signed_amount(self):
        return self.amount if self.kind == LedgerKind.CHARGE else -self.amount
