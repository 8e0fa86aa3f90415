"""Notices to customers (expiry warnings, a stopped allocation still paid), recorded in the
transaction that decides them, shown in the console and e-mailed by a task after it
commits: once each, whatever fails and retries. Their words are rendered when read."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.db import choices_check
from rentals.models.allocations import Allocation


class NoticeKind(models.TextChoices):
    EXPIRY_24H = "expiry_24h", _("paid period ends within 24 hours")
    EXPIRY_1H = "expiry_1h", _("paid period ends within an hour")
    STOPPED_WHILE_PAID = "stopped_paid", _("stopped, still paid")
    BOOKED = "booked", _("booking confirmed")
    EXTENDED = "extended", _("extension confirmed")
    WEBHOOK_DISABLED = "webhook_off", _("webhook endpoint disabled")
    ACCESS_READY = "access_ready", _("GPUs ready to log in to")
    MAINTENANCE_MOVED = "maint_moved", _("moved for maintenance")
    MAINTENANCE_CANCELLED = "maint_cancelled", _("cancelled for maintenance")
    IMPAIRED = "impaired", _("GPUs impaired")
    RECOVERED = "recovered", _("GPUs work again")
    CREDITED = "credited", _("impaired time credited")
    REFUNDED = "refunded", _("cancellation refunded")
    EXPORT_READY = "export_ready", _("statement export ready")


# Receipts for money moved, each naming its quote (a refund, the booking's).
RECEIPTS = (NoticeKind.BOOKED, NoticeKind.EXTENDED, NoticeKind.REFUNDED)
# A maintenance window's notices: one per window and allocation, naming the window.
MAINTENANCE_NOTICES = (NoticeKind.MAINTENANCE_MOVED, NoticeKind.MAINTENANCE_CANCELLED)
# An impaired span's notices: one per span and kind, naming the span.
SPAN_NOTICES = (NoticeKind.IMPAIRED, NoticeKind.RECOVERED, NoticeKind.CREDITED)


class Notice(models.Model):
    """One notice to one user. `sent_at` is set once the mail went out; `claimed_until`
    keeps two workers from sending the same notice at once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Every notice is about an allocation, except a disabled webhook endpoint's (its URL)
    # and a statement export's (the export).
    allocation = models.ForeignKey(
        Allocation, null=True, blank=True, on_delete=models.CASCADE, related_name="notices"
    )
    endpoint_url = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=20, choices=NoticeKind.choices)
    ends_at = models.DateTimeField(help_text="paid_until when the notice was decided")
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)  # seen in the console
    # A receipt's quote: its lines are the e-mail's, in the reader's language.
    quote = models.ForeignKey(
        "rentals.Quote", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    # A maintenance notice's window: its times and reason are the notice's words.
    maintenance = models.ForeignKey(
        "rentals.MaintenanceWindow", null=True, blank=True, on_delete=models.CASCADE,
        related_name="+",
    )  # fmt: skip
    # An impaired span's notice (impaired, recovered, credited): the span's times are its words.
    impaired_span = models.ForeignKey(
        "rentals.ImpairedSpan", null=True, blank=True, on_delete=models.CASCADE,
        related_name="+",
    )  # fmt: skip
    # A statement export's notice: the export it links to.
    statement_export = models.ForeignKey(
        "rentals.StatementExport", null=True, blank=True, on_delete=models.CASCADE,
        related_name="+",
    )  # fmt: skip

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "kind", "ends_at"],
                condition=Q(maintenance__isnull=True, impaired_span__isnull=True),
                name="rentals_notice_once",
            ),
            models.UniqueConstraint(
                fields=["impaired_span", "kind"],
                condition=Q(impaired_span__isnull=False),
                name="rentals_notice_once_per_span",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=SPAN_NOTICES, impaired_span__isnull=False)
                | (~Q(kind__in=SPAN_NOTICES) & Q(impaired_span__isnull=True)),
                name="rentals_notice_span_names_its_span",
            ),
            models.UniqueConstraint(
                fields=["maintenance", "allocation", "kind"],
                condition=Q(maintenance__isnull=False),
                name="rentals_notice_once_per_window",
            ),
            models.CheckConstraint(
                condition=Q(kind__in=MAINTENANCE_NOTICES, maintenance__isnull=False)
                | (~Q(kind__in=MAINTENANCE_NOTICES) & Q(maintenance__isnull=True)),
                name="rentals_notice_maintenance_names_its_window",
            ),
            choices_check("kind", NoticeKind, name="rentals_notice_kind_valid"),
            models.CheckConstraint(
                condition=Q(kind__in=RECEIPTS, quote__isnull=False)
                | (~Q(kind__in=RECEIPTS) & Q(quote__isnull=True)),
                name="rentals_notice_receipts_have_a_quote",
            ),
            models.CheckConstraint(
                condition=Q(
                    kind=NoticeKind.WEBHOOK_DISABLED, allocation__isnull=True, endpoint_url__gt=""
                )
                | Q(kind=NoticeKind.EXPORT_READY, allocation__isnull=True)
                | (
                    ~Q(kind__in=[NoticeKind.WEBHOOK_DISABLED, NoticeKind.EXPORT_READY])
                    & Q(allocation__isnull=False)
                ),
                name="rentals_notice_about_an_allocation_or_an_endpoint",
            ),
            models.CheckConstraint(
                condition=Q(kind=NoticeKind.EXPORT_READY, statement_export__isnull=False)
                | (~Q(kind=NoticeKind.EXPORT_READY) & Q(statement_export__isnull=True)),
                name="rentals_notice_export_names_its_export",
            ),
            models.UniqueConstraint(
                fields=["statement_export", "kind"],
                condition=Q(statement_export__isnull=False),
                name="rentals_notice_once_per_export",
            ),
        ]
        indexes = [
            models.Index(
                fields=["created_at"],
                condition=models.Q(sent_at__isnull=True),
                name="rentals_notice_unsent",
            ),
            # The bell's count on every page: a customer's unread notices only, not all of
            # theirs (thousands after a year) read and filtered.
            models.Index(
                fields=["user"],
                condition=models.Q(read_at__isnull=True),
                name="rentals_notice_unread",
            ),
        ]

    def __str__(self):
        return f"{self.kind} for {self.allocation_id}"
