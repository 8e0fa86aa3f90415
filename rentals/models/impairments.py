"""Impaired spans: the time a provider's fault kept some of an allocation's GPUs from working."""

from datetime import timedelta

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

from rentals.models.allocations import Allocation


def impaired_minimum() -> timedelta:
    """A span shorter than this (IMPAIRED_MIN_SECONDS) is not impaired time: not credited,
    not counted on the dashboard or in the metrics, though it was marked and told while it
    lasted."""
    return settings.ANCHORGPU["IMPAIRED_MIN"]


def span_counts(span) -> bool:
    """Whether the span is impaired time: still open, or at least the minimum long."""
    return span.ended_at is None or span.ended_at - span.started_at >= impaired_minimum()


class ImpairedSpanQuerySet(models.QuerySet):
    def counted(self):
        """The spans that are impaired time (`span_counts`), as a query."""
        return self.filter(
            Q(ended_at__isnull=True) | Q(ended_at__gte=F("started_at") + impaired_minimum())
        )


class ImpairedSpan(models.Model):
    """One stretch of time in which held GPUs could not work (`rentals.sql.faults.IMPAIRED_NOW`),
    from the sync that opened it to the one that saw them work again (or to a replacement).
    A mark beside the paid period, which never moves: a credit is per span, once (the
    ledger's `rentals_ledgerentry_one_credit_per_span`). `gpus`: every GPU found impaired
    during the span (ids), so the credit counts those GPUs only."""

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="impaired_spans"
    )
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    gpus = ArrayField(models.BigIntegerField())
    # Why, in facts: "gpu" (a flag on the GPU) or "node" (the node answered nothing).
    cause = models.CharField(max_length=10, default="gpu")

    objects = ImpairedSpanQuerySet.as_manager()

    class Meta:
        ordering = ["allocation", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation"],
                condition=Q(ended_at__isnull=True),
                name="rentals_impairedspan_one_open",
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gt=F("started_at")),
                name="rentals_impairedspan_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(gpus__len__gte=1), name="rentals_impairedspan_has_gpus"
            ),
        ]
        permissions = [
            ("replace_gpus", "Can replace an impaired allocation's GPUs"),
            ("issue_credit", "Can issue credit notes for impaired time"),
        ]

    def __str__(self):
        return f"impaired {self.allocation_id} from {self.started_at}"
