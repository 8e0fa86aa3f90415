"""Getting paid: the processor's ids for a team's cards and payments, the cash ledger, and
bank statements.

Card data never reaches us: a card is the processor's PaymentMethod id with its brand, last
four digits and expiry. A `Payment` binds one purchase's Idempotency-Key to one
PaymentIntent. `CashEntry` rows (money received, refunds paid out) are append-only (a
trigger, migration 0002); what was applied to invoices is `invoices.InvoicePayment`, so a
team's cash balance per currency is received − refunded − applied.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from core.db import choices_check
from core.money import CurrencyField, MoneyField
from invoices.models import Invoice
from rentals.models import Quote


class ProcessorCustomer(models.Model):
    """The processor's customer for a team: its cards are attached to it."""

    team = models.OneToOneField(Team, on_delete=models.PROTECT, related_name="+", primary_key=True)
    customer_id = models.CharField(max_length=100, unique=True)

    def __str__(self):
        return self.customer_id


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Card(models.Model):  # type: ignore[django-manager-missing]
    """A saved card: the processor's PaymentMethod and what a person needs to recognise it."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="cards")
    processor_id = models.CharField(max_length=100, unique=True)
    brand = models.CharField(max_length=20)
    last4 = models.CharField(max_length=4)
    exp_month = models.PositiveSmallIntegerField()
    exp_year = models.PositiveSmallIntegerField()
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["team", "-is_default", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["team"],
                condition=Q(is_default=True, removed_at__isnull=True),
                name="payments_card_one_default_per_team",
            ),
            models.CheckConstraint(
                condition=Q(exp_month__gte=1, exp_month__lte=12), name="payments_card_month"
            ),
        ]

    def __str__(self):
        return f"{self.brand} •••• {self.last4}"


class PaymentState(models.TextChoices):
    REQUIRES_ACTION = "requires_action", _("waiting for 3-D Secure")
    AUTHORISED = "authorised", _("authorised")
    BOOKED = "booked", _("booked, to capture")
    CAPTURED = "captured", _("captured")
    CAPTURE_FAILED = "capture_failed", _("capture failed")
    CANCELLED = "cancelled", _("authorisation cancelled")
    DECLINED = "declined", _("declined")


class Payment(models.Model):
    """One purchase's card payment: the Idempotency-Key bound to one PaymentIntent, for
    exactly the quote's gross. Authorised before the purchase's transaction, marked booked
    in it, captured after it (or cancelled when the purchase was refused)."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    idempotency_key = models.CharField(max_length=64)
    quote = models.ForeignKey(Quote, on_delete=models.PROTECT, related_name="+")
    card = models.ForeignKey(Card, null=True, on_delete=models.PROTECT, related_name="+")
    intent_id = models.CharField(max_length=100, blank=True, default="")
    client_secret = models.CharField(max_length=200, blank=True, default="")
    amount = MoneyField()
    currency = CurrencyField()
    state = models.CharField(max_length=20, choices=PaymentState.choices)
    decline_code = models.CharField(max_length=60, blank=True, default="")
    decline_message = models.CharField(max_length=300, blank=True, default="")
    capture_attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    captured_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "idempotency_key"], name="payments_payment_one_per_key"
            ),
            models.UniqueConstraint(
                fields=["intent_id"], condition=~Q(intent_id=""), name="payments_payment_intent"
            ),
            choices_check("state", PaymentState, name="payments_payment_state_valid"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="payments_payment_positive"),
        ]
        indexes = [models.Index(fields=["state", "updated_at"], name="payments_payment_state")]

    def __str__(self):
        return self.intent_id or f"payment {self.pk}"


class CashKind(models.TextChoices):
    RECEIVED = "received", _("payment received")
    REFUNDED = "refunded", _("refund paid out")


class CashSource(models.TextChoices):
    CARD = "card", _("card")
    TRANSFER = "transfer", _("bank transfer")
    MANUAL = "manual", _("recorded by staff")


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class CashEntry(models.Model):  # type: ignore[django-manager-missing]
    """Money that moved: received from a team (a capture, a transfer, a payment staff
    recorded) or paid back to it (a refund). Append-only; amounts are positive and the kind
    says the direction."""

    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    currency = CurrencyField()
    kind = models.CharField(max_length=10, choices=CashKind.choices)
    source = models.CharField(max_length=10, choices=CashSource.choices)
    amount = MoneyField()
    at = models.DateTimeField()
    payment = models.ForeignKey(
        Payment, null=True, blank=True, on_delete=models.PROTECT, related_name="cash"
    )
    transfer = models.ForeignKey(
        "BankTransfer", null=True, blank=True, on_delete=models.PROTECT, related_name="cash"
    )
    credit_note = models.ForeignKey(
        Invoice, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The processor's refund id, the bank's reference, or staff's reason.
    reference = models.CharField(max_length=300, blank=True, default="")
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
        related_name="+",
    )  # fmt: skip

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            choices_check("kind", CashKind, name="payments_cashentry_kind_valid"),
            choices_check("source", CashSource, name="payments_cashentry_source_valid"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="payments_cashentry_positive"),
            # A refund of a credit note is paid once (a replayed task writes nothing).
            models.UniqueConstraint(
                fields=["credit_note"],
                condition=Q(kind="refunded"),
                name="payments_cashentry_one_refund_per_credit_note",
            ),
            models.UniqueConstraint(
                fields=["payment"],
                condition=Q(kind="received"),
                name="payments_cashentry_one_receipt_per_payment",
            ),
        ]
        indexes = [models.Index(fields=["team", "currency"], name="payments_cash_team")]

    def __str__(self):
        return f"{self.kind} {self.amount} {self.currency}"


class ProcessorEvent(models.Model):
    """A processor event applied once: its id is the key (a replay finds it here)."""

    event_id = models.CharField(max_length=100, primary_key=True)
    type = models.CharField(max_length=100)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.event_id


class BankStatement(models.Model):
    """An uploaded statement (camt.053 or MT940); its transfers are applied once each."""

    format = models.CharField(max_length=10)
    digest = models.CharField(max_length=64, unique=True)  # sha256 of the file
    filename = models.CharField(max_length=200, blank=True, default="")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    uploaded_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.format} {self.digest[:12]}"


class TransferState(models.TextChoices):
    MATCHED = "matched", _("matched")
    UNMATCHED = "unmatched", _("waiting for staff")


class BankTransfer(models.Model):
    """A credit on the provider's bank account: matched to a team (its invoices paid from
    it), or waiting in the unmatched queue for staff."""

    statement = models.ForeignKey(BankStatement, on_delete=models.PROTECT, related_name="transfers")
    reference = models.CharField(max_length=200, unique=True)  # the bank's, or a digest
    booked_on = models.DateField()
    amount = MoneyField()
    currency = CurrencyField()
    title = models.TextField(blank=True, default="")
    counterparty = models.CharField(max_length=300, blank=True, default="")
    state = models.CharField(max_length=10, choices=TransferState.choices)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    matched_by = models.CharField(max_length=20, blank=True, default="")  # number, amount, staff

    class Meta:
        ordering = ["-booked_on", "-id"]
        constraints = [
            choices_check("state", TransferState, name="payments_banktransfer_state_valid"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="payments_banktransfer_credit"),
        ]

    def __str__(self):
        return f"{self.reference}: {self.amount} {self.currency}"


class ReminderKind(models.TextChoices):
    DUE_SOON = "due_soon", _("due soon")
    OVERDUE = "overdue", _("overdue")


class PaymentReminder(models.Model):
    """A reminder of an unpaid invoice sent to one owner or billing member: once per invoice,
    kind and person, whatever the schedule replays."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=10, choices=ReminderKind.choices)
    sent_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["invoice", "kind", "user"], name="payments_reminder_once"
            ),
            choices_check("kind", ReminderKind, name="payments_reminder_kind_valid"),
        ]

    def __str__(self):
        return f"{self.kind} {self.invoice_id} → {self.user_id}"
