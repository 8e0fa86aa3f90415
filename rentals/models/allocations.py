"""Quotes, allocations of specific GPUs for a paid period, their events and the ledger."""

import uuid

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import BigIntegerRangeField, DateTimeRangeField, RangeOperators
from django.db import models
from django.db.models import F, Func, Q, Value
from django.utils.translation import gettext_lazy as _

from catalog.models import Gpu, GpuModel, Node, Option, RentalPeriod
from catalog.money import CurrencyField, MoneyField


class Quote(models.Model):
    """A complete, priced offer; a snapshot that no later price change alters."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="+")
    gpu_count = models.PositiveSmallIntegerField()
    period = models.ForeignKey(RentalPeriod, on_delete=models.PROTECT, related_name="+")
    period_count = models.PositiveSmallIntegerField()
    paid_from = models.DateTimeField()
    paid_until = models.DateTimeField()
    starts_now = models.BooleanField(default=True)
    total = MoneyField()
    currency = CurrencyField()
    created_at = models.DateTimeField(auto_now_add=True)
    valid_until = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(paid_from__lt=F("paid_until")), name="rentals_quote_period_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(total__gte=0), name="rentals_quote_total_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(gpu_count__gte=1), name="rentals_quote_gpu_count_positive"
            ),
            models.CheckConstraint(
                condition=Q(period_count__gte=1), name="rentals_quote_period_count_positive"
            ),
        ]

    def __str__(self):
        return f"Quote {self.id}"


class QuoteLineKind(models.TextChoices):
    GPU = "gpu", _("GPUs")
    OPTION = "option", _("option")


class QuoteLine(models.Model):
    quote = models.ForeignKey(Quote, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=10, choices=QuoteLineKind.choices)
    option = models.ForeignKey(Option, null=True, blank=True, on_delete=models.PROTECT)
    description = models.CharField(max_length=200)
    quantity = models.PositiveIntegerField()
    unit_price = MoneyField()
    amount = MoneyField()

    class Meta:
        ordering = ["quote", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["quote", "position"], name="rentals_quoteline_position"
            ),
            models.CheckConstraint(
                condition=Q(amount__gte=0), name="rentals_quoteline_amount_not_negative"
            ),
        ]

    def __str__(self):
        return self.description


class AllocationState(models.TextChoices):
    SCHEDULED = "scheduled", _("scheduled")
    RUNNING = "running", _("running")
    STOPPED = "stopped", _("stopped")
    EXPIRED = "expired", _("expired")
    CANCELLED = "cancelled", _("cancelled")


LIVE_STATES = (AllocationState.SCHEDULED, AllocationState.RUNNING, AllocationState.STOPPED)


class Allocation(models.Model):
    """Specific GPUs on one node, held for [paid_from, paid_until).

    Stop and start change `state` only; a database trigger refuses any change of
    `paid_from`, any shortening of `paid_until`, and a `paid_until` change together with a
    state change (only an extension moves it).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    quote = models.OneToOneField(Quote, on_delete=models.PROTECT, related_name="allocation")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="allocations")
    gpu_count = models.PositiveSmallIntegerField()
    period = models.ForeignKey(RentalPeriod, on_delete=models.PROTECT, related_name="+")
    paid_from = models.DateTimeField()
    paid_until = models.DateTimeField()
    state = models.CharField(max_length=10, choices=AllocationState.choices)
    created_at = models.DateTimeField(auto_now_add=True)
    warned_24h_at = models.DateTimeField(null=True, blank=True)
    warned_1h_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-paid_from"]
        constraints = [
            models.CheckConstraint(
                condition=Q(paid_from__lt=F("paid_until")),
                name="rentals_allocation_period_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(gpu_count__gte=1), name="rentals_allocation_gpu_count_positive"
            ),
        ]
        indexes = [
            models.Index(fields=["user", "-paid_from"]),
            models.Index(fields=["state", "paid_until"]),
            models.Index(fields=["state", "paid_from"]),
        ]

    def __str__(self):
        return f"{self.gpu_count}× {self.gpu_model} on {self.node} ({self.state})"

    @property
    def is_live(self):
        return self.state in LIVE_STATES


class Int8Range(Func):
    function = "int8range"
    output_field = BigIntegerRangeField()


class TsTzRange(Func):
    function = "tstzrange"
    output_field = DateTimeRangeField()


class AllocationGpu(models.Model):
    """One GPU held by an allocation for [starts_at, ends_at): the row the exclusion guards.

    `int8range(gpu_id, gpu_id, '[]') WITH =` needs no btree_gist, which the embedded
    PostgreSQL lacks. A cancelled allocation releases its rows, freeing the time.
    """

    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="held")
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="held")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    released = models.BooleanField(default=False)

    class Meta:
        ordering = ["allocation", "gpu__index"]
        constraints = [
            models.CheckConstraint(
                condition=Q(starts_at__lt=F("ends_at")), name="rentals_allocationgpu_not_empty"
            ),
            models.UniqueConstraint(
                fields=["allocation", "gpu"], name="rentals_allocationgpu_once"
            ),
            ExclusionConstraint(
                name="rentals_allocationgpu_no_overlap",
                expressions=[
                    (Int8Range(F("gpu"), F("gpu"), Value("[]")), RangeOperators.EQUAL),
                    (TsTzRange("starts_at", "ends_at", Value("[)")), RangeOperators.OVERLAPS),
                ],
                condition=Q(released=False),
                violation_error_code="gpu_double_booked",
                violation_error_message="GPU already booked for an overlapping period.",
            ),
        ]

    def __str__(self):
        return f"{self.gpu_id} [{self.starts_at}, {self.ends_at})"


EVENT_LABELS = {
    "booked": _("booked"),
    "stop": _("stopped by the owner"),
    "start": _("started"),
    "cancel": _("cancelled, refunded"),
    "extend": _("extended"),
    "expire": _("expired at paid-until"),
}


class AllocationEvent(models.Model):
    """A change of an allocation: who, when, from which state to which."""

    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=20)
    from_state = models.CharField(max_length=10, blank=True)
    to_state = models.CharField(max_length=10, blank=True)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["allocation", "at", "id"]

    def __str__(self):
        return f"{self.kind} at {self.at}"

    @property
    def kind_label(self):
        return EVENT_LABELS.get(self.kind, self.kind)

    @property
    def from_label(self):
        return AllocationState(self.from_state).label if self.from_state else ""

    @property
    def to_label(self):
        return AllocationState(self.to_state).label if self.to_state else ""


class LedgerKind(models.TextChoices):
    CHARGE = "charge", _("charge")
    REFUND = "refund", _("refund")


class LedgerEntry(models.Model):
    """Money moved for a customer. Amounts are never negative; the kind gives the sign."""

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
                condition=Q(kind="refund"),
                name="rentals_ledgerentry_one_refund",
            ),
        ]
        indexes = [models.Index(fields=["user", "-at"])]

    def __str__(self):
        return f"{self.kind} {self.amount} {self.currency}"

    @property
    def signed_amount(self):
        return self.amount if self.kind == LedgerKind.CHARGE else -self.amount


class IdempotencyKey(models.Model):
    """The first response to (user, key), replayed for retries of the same request."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="rentals_idempotencykey_once"),
        ]
        indexes = [models.Index(fields=["created_at"])]

    def __str__(self):
        return self.key
