"""What the fleet report reads of closed steps: kept once, since they cannot change.

The tables were made by rentals (0033) and keep its names: reports 0001 took the models
over in the migrations' state only."""

from django.db import models

from core.db import choices_check
from core.money import CurrencyField, MoneyField
from rentals.models.ledger import LedgerKind


class Step(models.TextChoices):
    """The fleet report's steps: hours up to a week, days beyond (`reports.selectors.step_for`).
    The values are the rollups' bucket names, so one `bucket` names both."""

    HOUR = "hour"
    DAY = "day"


class AllocatedStep(models.Model):
    """GPUs held by allocations at some moment of one closed hour or day (UTC): the
    fleet report's "allocated" line where it can no longer change. Written once per step by
    `reports.services.allocated_steps_close`, after the step's end only, and never
    rewritten: a holding's start never moves, a cancel releases only holdings not yet started,
    and an extension or a replacement moves only an end still ahead, so every holding that
    overlaps a step closed before every open transaction began is already there."""

    bucket = models.CharField(max_length=4, choices=Step.choices)
    at = models.DateTimeField(help_text="the step's start")
    gpus = models.PositiveIntegerField()

    class Meta:
        db_table = "rentals_allocatedstep"
        constraints = [
            models.UniqueConstraint(fields=["bucket", "at"], name="rentals_allocatedstep_once"),
            choices_check("bucket", Step, name="rentals_allocatedstep_bucket_valid"),
        ]

    def __str__(self):
        return f"{self.bucket} {self.at}: {self.gpus}"


class LedgerDay(models.Model):
    """The ledger's rows of one closed day (UTC) summed per kind, currency and rental period:
    the fleet report's revenue over its whole days. Written with the day's `AllocatedStep`, in
    one transaction: a day that has that row has these (none, where it had no ledger rows).
    A ledger row is never changed, and its time is its writing statement's clock, so no row
    joins a day closed before its transaction began."""

    at = models.DateTimeField(help_text="the day's start")
    kind = models.CharField(max_length=10, choices=LedgerKind.choices)
    currency = CurrencyField()
    period = models.ForeignKey(
        "catalog.RentalPeriod", on_delete=models.PROTECT, related_name="+", db_index=False
    )  # found by the unique (at, kind, currency, period) of its days
    net = MoneyField()
    entries = models.PositiveIntegerField()

    class Meta:
        db_table = "rentals_ledgerday"
        constraints = [
            models.UniqueConstraint(
                fields=["at", "kind", "currency", "period"], name="rentals_ledgerday_once"
            ),
            choices_check("kind", LedgerKind, name="rentals_ledgerday_kind_valid"),
        ]

    def __str__(self):
        return f"{self.at:%Y-%m-%d} {self.kind} {self.net} {self.currency}"
