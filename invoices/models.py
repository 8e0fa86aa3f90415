"""Invoices and credit notes: numbered, immutable documents issued for ledger rows.

An issued document never changes (a trigger refuses UPDATE and DELETE, migration 0002):
the seller's and buyer's details are copied into it when it is issued, and what happens to
it later (sending it to KSeF) lives in `KsefSubmission`, a row of its own.
"""

from decimal import Decimal

from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from core.db import choices_check
from core.money import CurrencyField, MoneyField
from rentals.models import LedgerEntry

RATE_DIGITS, RATE_PLACES = 5, 4  # 0.2300


class InvoiceKind(models.TextChoices):
    INVOICE = "invoice", _("invoice")
    CREDIT_NOTE = "credit_note", _("credit note")


class InvoiceState(models.TextChoices):
    """What the API says of a document: numbered within seconds of its commit."""

    BEING_NUMBERED = "being_numbered", _("being numbered")
    ISSUED = "issued", _("issued")


class InvoiceCounter(models.Model):
    """The last number given per series and year: upserted and incremented by the numbering
    step after the documents' commit (`invoices.sql.NUMBER`), never on a booking's path, so
    a rolled-back booking never took a number and two documents never share one."""

    series = models.CharField(max_length=20)
    year = models.PositiveSmallIntegerField()
    last = models.PositiveIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "year"], name="invoices_counter_series_year")
        ]

    def __str__(self):
        return f"{self.series}/{self.year}: {self.last}"


class ExchangeRate(models.Model):
    """A foreign currency's rate in PLN for one day, as the seller's staff enter it from the
    NBP's table A (nothing here reaches the NBP). An invoice in a foreign currency with
    Polish VAT takes the rate of the last day before its sale date and keeps a copy."""

    currency = CurrencyField()
    effective_on = models.DateField()
    rate = models.DecimalField(max_digits=12, decimal_places=6, help_text=_("PLN per unit"))
    table_no = models.CharField(
        _("NBP table"), max_length=40, blank=True, help_text=_("e.g. 231/A/NBP/2026")
    )

    class Meta:
        ordering = ["currency", "-effective_on"]
        constraints = [
            models.UniqueConstraint(
                fields=["currency", "effective_on"], name="invoices_exchangerate_one_per_day"
            ),
            models.CheckConstraint(condition=Q(rate__gt=0), name="invoices_exchangerate_positive"),
        ]

    def __str__(self):
        return f"{self.currency} {self.effective_on}: {self.rate} PLN"


# How far back a day's exchange rate may be from the sale it converts: NBP publishes table A
# each business day, and the longest run without one (Christmas and a weekend) is under a
# week; an older rate is no rate "of the last business day before the sale".
RATE_MAX_AGE_DAYS = 7


class HeldInvoice(models.Model):
    """A charge whose invoice waits for its exchange rate: Polish VAT in a foreign currency
    is also stated in PLN (FA(3)'s P_14_1W) at the rate of the last business day before the
    sale, and no such rate was entered. Written by the issuing statement instead of the
    invoice, deleted by the statement that issues it once staff enter the rate; staff are
    told once (`alerted_at`)."""

    ledger_entry = models.OneToOneField(
        LedgerEntry, on_delete=models.PROTECT, related_name="+", primary_key=True
    )
    currency = CurrencyField()
    sold_on = models.DateField()  # in the invoices' zone: a rate of a day before it is needed
    held_at = models.DateTimeField()
    alerted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sold_on", "currency", "ledger_entry"]
        indexes = [models.Index(fields=["sold_on", "currency"], name="invoices_held_day")]

    def __str__(self):
        return f"{self.ledger_entry_id}: {self.currency} sold on {self.sold_on}"


class Invoice(models.Model):
    """An invoice for one charge, or a credit note for a refund or a credit that names the
    invoice it corrects. Written by `invoices.sql.ISSUE` in the ledger's transaction, without
    a number; numbered (and dated) once after that commit by `invoices.sql.NUMBER`, in the
    order of the issuing transactions (`xact`), and never changed again."""

    kind = models.CharField(max_length=12, choices=InvoiceKind.choices)
    series = models.CharField(max_length=20)
    year = models.PositiveSmallIntegerField()  # of the issue day; set again when numbered
    number = models.PositiveIntegerField(null=True, blank=True)  # None: being numbered
    display_number = models.CharField(max_length=40, blank=True)  # "" until numbered
    # The issuing transaction's id (xid8): what numbering orders by and waits on.
    xact = models.BigIntegerField(null=True, blank=True)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    ledger_entry = models.ForeignKey(LedgerEntry, on_delete=models.PROTECT, related_name="+")
    corrects = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="corrections"
    )
    issued_at = models.DateTimeField()  # the database's clock when numbered (written before)
    issued_on = models.DateField()  # in the seller's time zone (INVOICE_TIME_ZONE)
    sold_on = models.DateField()  # the charge's (or refund's) day, same zone
    seller = models.JSONField()  # copies: later edits never change an issued document
    buyer = models.JSONField()
    tax_treatment = models.CharField(max_length=20)
    vat_rate = models.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES)
    currency = CurrencyField()
    net = MoneyField()
    vat = MoneyField()
    gross = MoneyField()
    # Polish VAT in PLN for a foreign currency, at a staff-entered rate (ExchangeRate).
    pln_rate = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    pln_rate_on = models.DateField(null=True, blank=True)
    pln_rate_table = models.CharField(max_length=40, blank=True)
    reason = models.CharField(max_length=12)  # the ledger row's reason: booking, cancellation…
    legal_note = models.TextField(
        blank=True
    )  # both languages, e.g. "Odwrotne obciążenie / Reverse charge"
    # An invoiced team's invoice is due `payment_terms_days` after its issue day; a card
    # team's has none (it is paid by the capture, `InvoicePayment`).
    due_on = models.DateField(null=True, blank=True)

    class Meta:
        ordering = ["-issued_at", "-id"]
        constraints = [
            choices_check("kind", InvoiceKind, name="invoices_invoice_kind_valid"),
            models.UniqueConstraint(
                fields=["series", "year", "number"], name="invoices_invoice_number_unique"
            ),
            models.UniqueConstraint(
                fields=["ledger_entry"],
                condition=Q(kind=InvoiceKind.INVOICE),
                name="invoices_invoice_one_per_charge",
            ),
            models.UniqueConstraint(
                fields=["ledger_entry", "corrects"],
                condition=Q(kind=InvoiceKind.CREDIT_NOTE),
                name="invoices_invoice_one_correction_per_row",
            ),
            models.CheckConstraint(
                condition=Q(kind=InvoiceKind.INVOICE, corrects__isnull=True)
                | Q(kind=InvoiceKind.CREDIT_NOTE, corrects__isnull=False),
                name="invoices_invoice_credit_note_corrects",
            ),
            models.CheckConstraint(
                condition=Q(gross=F("net") + F("vat")), name="invoices_invoice_gross_is_net_vat"
            ),
            models.CheckConstraint(
                condition=Q(number__gte=1), name="invoices_invoice_number_positive"
            ),
            models.CheckConstraint(
                condition=Q(number__isnull=True, display_number="")
                | Q(number__isnull=False, display_number__gt=""),
                name="invoices_invoice_numbered_has_number",
            ),
        ]
        indexes = [
            models.Index(fields=["team", "-issued_at"], name="invoices_team_issued"),
            models.Index(
                fields=["xact", "id"], condition=Q(number__isnull=True), name="invoices_unnumbered"
            ),
        ]

    def __str__(self):
        return self.display_number or f"#{self.pk}"

    @property
    def numbered(self) -> bool:
        return self.number is not None

    @property
    def is_credit_note(self) -> bool:
        return self.kind == InvoiceKind.CREDIT_NOTE

    def vat_in_pln(self) -> Decimal | None:
        """Polish VAT in PLN at the copied rate, each line's share converted and rounded
        to the grosz (as the FA(3) XML's P_14_1W); None in PLN or without VAT or a rate."""
        if self.pln_rate is None:
            return None
        return sum(
            (round(line.vat * self.pln_rate, 2) for line in self.lines.all()), Decimal("0.00")
        )


class PaymentStatus(models.TextChoices):
    UNPAID = "unpaid", _("unpaid")
    PARTIALLY_PAID = "partially_paid", _("partially paid")
    PAID = "paid", _("paid")
    OVERDUE = "overdue", _("overdue")


class PaymentSource(models.TextChoices):
    CARD = "card", _("card payment")
    TRANSFER = "transfer", _("bank transfer")
    MANUAL = "manual", _("recorded by staff")
    CREDIT = "credit", _("credit note")


class InvoicePayment(models.Model):
    """An amount of the team's cash applied to an invoice (a capture, a transfer, a payment
    staff recorded), or to a credit note (negative: the credit goes back to the team's cash,
    to be refunded or applied again). Append-only (a trigger, migration 0005_invoicepayment_append_only): an invoice's
    payment status is what these rows add up to, never a flag that could drift."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="payments")
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    currency = CurrencyField()
    amount = MoneyField()
    source = models.CharField(max_length=10, choices=PaymentSource.choices)
    paid_on = models.DateField()  # in the invoices' time zone
    at = models.DateTimeField()
    # What paid it, in the payments app's words (pi_…, a bank reference, a staff note).
    reference = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            choices_check("source", PaymentSource, name="invoices_invoicepayment_source_valid"),
            models.CheckConstraint(condition=~Q(amount=0), name="invoices_invoicepayment_not_zero"),
        ]
        indexes = [models.Index(fields=["team", "currency"], name="invoices_payment_team")]

    def __str__(self):
        return f"{self.invoice_id}: {self.amount} {self.currency}"


class InvoiceLine(models.Model):
    """One line, as facts with the catalog's names copied in both languages (`facts`), put
    into words by `invoices.texts`; negative on a credit note, which mirrors what it corrects."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="lines")
    position = models.PositiveSmallIntegerField()
    facts = models.JSONField()
    quantity = models.DecimalField(max_digits=12, decimal_places=3)
    unit_price = MoneyField()  # net
    net = MoneyField()
    vat_rate = models.DecimalField(max_digits=RATE_DIGITS, decimal_places=RATE_PLACES)
    vat = MoneyField()
    gross = MoneyField()

    class Meta:
        ordering = ["invoice", "position"]
        constraints = [
            models.UniqueConstraint(fields=["invoice", "position"], name="invoices_line_position"),
            models.CheckConstraint(
                condition=Q(gross=F("net") + F("vat")), name="invoices_line_gross_is_net_vat"
            ),
        ]

    def __str__(self):
        return f"{self.invoice_id}#{self.position}"


class KsefStatus(models.TextChoices):
    PENDING = "pending", _("waiting to be sent")
    ACCEPTED = "accepted", _("accepted by KSeF")
    FAILED = "failed", _("sending failed")


class KsefSubmission(models.Model):
    """What became of sending one invoice to KSeF: the invoice row itself never changes."""

    invoice = models.OneToOneField(Invoice, on_delete=models.PROTECT, related_name="ksef")
    status = models.CharField(max_length=10, choices=KsefStatus.choices, default=KsefStatus.PENDING)
    ksef_number = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    sent_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [choices_check("status", KsefStatus, name="invoices_ksef_status_valid")]

    def __str__(self):
        return f"{self.invoice_id}: {self.status}"
