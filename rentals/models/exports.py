"""Statement exports: a large statement's CSV written by a worker into the database (never
a local file: any web process serves it), kept a few days for the team's owner and billing
members, as Stripe's report runs are."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import pgettext_lazy

from accounts.models import Team
from core.db import choices_check
from rentals.models.ledger import LedgerKind


class ExportState(models.TextChoices):
    QUEUED = "queued", pgettext_lazy("statement export", "queued")
    RUNNING = "running", pgettext_lazy("statement export", "being written")
    READY = "ready", pgettext_lazy("statement export", "ready")
    FAILED = "failed", pgettext_lazy("statement export", "failed")
    EXPIRED = "expired", pgettext_lazy("statement export", "expired")


# Still to be written: what the sweep resumes and what a team may hold only a few of.
IN_FLIGHT = (ExportState.QUEUED, ExportState.RUNNING)


class StatementExport(models.Model):
    """One requested export of a team's statement, its range and kind as the statement's
    filters, written in the requester's language. Its file is `StatementExportPart` rows:
    one gzip stream cut into parts, so neither writing nor reading holds the whole file.
    An expired export keeps its row (the notice's link then says so) and loses its parts."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+", db_index=False)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    language = models.CharField(max_length=10)  # the requester's, for the descriptions
    since = models.DateField(null=True, blank=True)
    until = models.DateField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=LedgerKind.choices, blank=True)
    state = models.CharField(max_length=10, choices=ExportState.choices, default=ExportState.QUEUED)
    rows = models.PositiveIntegerField(null=True, blank=True)
    size = models.PositiveBigIntegerField(null=True, blank=True)  # the CSV's bytes
    stored = models.PositiveBigIntegerField(null=True, blank=True)  # its gzip's bytes
    parts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)  # set once ready
    claimed_until = models.DateTimeField(null=True, blank=True)  # a worker writing it
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            choices_check("state", ExportState, name="rentals_statementexport_state_valid"),
            choices_check(
                "kind", LedgerKind, blank=True, name="rentals_statementexport_kind_valid"
            ),
            models.CheckConstraint(
                condition=Q(since__isnull=True) | Q(until__isnull=True) | Q(since__lte=F("until")),
                name="rentals_statementexport_range_in_order",
            ),
            models.CheckConstraint(
                condition=~Q(state=ExportState.READY)
                | Q(
                    rows__isnull=False,
                    size__isnull=False,
                    stored__isnull=False,
                    finished_at__isnull=False,
                    expires_at__isnull=False,
                ),
                name="rentals_statementexport_ready_is_complete",
            ),
        ]
        indexes = [
            # The statement page's recent exports of a team.
            models.Index(fields=["team", "-created_at"], name="rentals_export_team_recent"),
            # The sweep's work: exports still to write, and ready ones to expire.
            models.Index(
                fields=["created_at"],
                condition=Q(state__in=IN_FLIGHT),
                name="rentals_export_in_flight",
            ),
            models.Index(
                fields=["expires_at"],
                condition=Q(state=ExportState.READY),
                name="rentals_export_ready_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"statement export {self.pk} ({self.state})"

    @property
    def filters(self) -> dict[str, object]:
        """The statement's filters (rentals.selectors.ledger_entries) this export selects."""
        return {"since": self.since, "until": self.until, "kind": self.kind}


class StatementExportPart(models.Model):
    """One piece of an export's gzip stream, in order (`seq` from 0): the pieces joined are
    one gzip file of the CSV."""

    export = models.ForeignKey(
        StatementExport, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    seq = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["export", "seq"], name="rentals_exportpart_once"),
        ]

    def __str__(self) -> str:
        return f"part {self.seq} of {self.export_id}"
