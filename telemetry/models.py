"""Telemetry from the nodes' exporters: polls, per-GPU samples, rollups and flags."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from catalog.models import Gpu, GpuModel, Node, Region
from core.db import choices_check


class PollOutcome(models.TextChoices):
    OK = "ok", _("ok")
    DEGRADED = "degraded", _("degraded")
    UNREACHABLE = "unreachable", _("unreachable")
    MALFORMED = "malformed", _("malformed")


class Poll(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="polls")
    at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField()
    outcome = models.CharField(max_length=12, choices=PollOutcome.choices)
    error = models.TextField(blank=True)
    gpus_seen = models.PositiveSmallIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["node", "-at"], name="telemetry_poll_node_at"),
            # /metrics' last minutes and the raw retention's prune read a range of `at`.
            models.Index(fields=["at"], name="telemetry_poll_at"),
        ]
        constraints = [choices_check("outcome", PollOutcome, name="telemetry_poll_outcome_valid")]

    def __str__(self):
        return f"{self.node_id} at {self.at}: {self.outcome}"


class GpuSample(models.Model):
    """One GPU at one poll. NULL means the exporter did not report it, never zero."""

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+", db_index=False)
    at = models.DateTimeField()
    utilization = models.FloatField(null=True)
    memory_used_mib = models.FloatField(null=True)
    memory_total_mib = models.FloatField(null=True)
    power_w = models.FloatField(null=True)
    temperature_c = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    xid = models.IntegerField(null=True)

    class Meta:
        indexes = [
            models.Index(fields=["gpu", "at"], name="telemetry_sample_gpu_at"),
            models.Index(fields=["at"], name="telemetry_sample_at"),
        ]

    def __str__(self):
        return f"{self.gpu_id} at {self.at}"


class RollupBucket(models.TextChoices):
    MINUTE = "minute"
    HOUR = "hour"
    DAY = "day"


class GpuRollup(models.Model):
    """The former per-GPU rollups (averages per minute, hour or day). Neither written nor read
    any more: their hours and days became `GpuHour` and `GpuDay` rows when migrated; the
    minute rows stay only until they are converted (a past holding's partial first and
    last hour), then the table goes."""

    Bucket = RollupBucket

    gpu = models.ForeignKey(Gpu, on_delete=models.CASCADE, related_name="+", db_index=False)
    bucket = models.CharField(max_length=6, choices=Bucket.choices)
    at = models.DateTimeField()
    samples = models.PositiveIntegerField()
    utilization_avg = models.FloatField(null=True)
    utilization_max = models.FloatField(null=True)
    memory_used_max_mib = models.FloatField(null=True)
    memory_total_mib = models.FloatField(null=True)
    power_avg_w = models.FloatField(null=True)
    temperature_max_c = models.FloatField(null=True)
    # From deltas between consecutive samples, the later one's bucket taking the interval
    # (so bucket edges lose nothing): the energy counter's rise, resets handled as
    # Prometheus' increase() does; seconds covered by samples, and of those, busy ones.
    energy_j = models.FloatField(null=True)
    covered_s = models.FloatField(null=True)
    busy_s = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["gpu", "bucket", "at"], name="telemetry_gpurollup_once"
            ),
            choices_check("bucket", RollupBucket, name="telemetry_gpurollup_bucket_valid"),
        ]
        indexes = [models.Index(fields=["bucket", "at"], name="telemetry_rollup_bucket_at")]

    def __str__(self):
        return f"{self.gpu_id} {self.bucket} {self.at}"


class GpuHourFigures(models.Model):
    """Sums and peaks of one GPU over one bucket, so a longer range adds them up exactly:
    the average is `util_sum / util_samples`, never an average of averages. Energy and
    time come from deltas between consecutive samples, the later one's bucket taking the
    interval (so bucket edges lose nothing), as `telemetry.sql.samples_with_deltas` counts
    them. `gpu_id` is a plain number, no foreign key: a rollup outlives nothing it checks,
    and a key's check at commit cost more than the row (100,000 GPUs write 100,000 an hour).
    """

    gpu_id = models.BigIntegerField()
    at = models.DateTimeField()
    samples = models.IntegerField()
    util_sum = models.FloatField()  # utilisation × samples that reported it
    util_samples = models.IntegerField()
    util_max = models.FloatField(null=True)
    mem_max_mib = models.FloatField(null=True)
    mem_total_mib = models.FloatField(null=True)
    power_sum = models.FloatField()  # power × samples that reported it
    power_samples = models.IntegerField()
    temp_max_c = models.FloatField(null=True)
    energy_j = models.FloatField(null=True)
    covered_s = models.FloatField()
    busy_s = models.FloatField()

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.gpu_id} at {self.at}"

    @property
    def util_avg(self) -> float | None:
        return self.util_sum / self.util_samples if self.util_samples else None

    @property
    def power_avg_w(self) -> float | None:
        return self.power_sum / self.power_samples if self.power_samples else None


class GpuHour(GpuHourFigures):
    """One GPU's closed hour, written by the rollup when the hour has closed (never the
    open one). The table is partitioned by month (`telemetry.partitions`), so retention
    drops whole months."""

    pk = models.CompositePrimaryKey("gpu_id", "at")

    class Meta:
        # A partition's key must be in every unique index: the primary key holds `at`.
        indexes = [models.Index(fields=["at"], name="telemetry_gpuhour_at")]


class GpuDay(GpuHourFigures):
    """One GPU's closed day, summed from its hours. Partitioned by month too, so one
    retention rule drops both (a day row is 1/24 of the hours': 3 million rows a month at
    100,000 GPUs, where deleting them row by row would still mean a month's vacuum)."""

    pk = models.CompositePrimaryKey("gpu_id", "at")

    class Meta:
        indexes = [models.Index(fields=["at"], name="telemetry_gpuday_at")]


class RollupMark(models.Model):
    """How far one shard of GPUs (`gpu_id // ROLLUP_SHARD_SIZE`) is rolled up: its minutes
    (fleet minutes, busy minutes) until `minutes_until`, its hours until `hours_until`.
    Moved by the shard's own transaction, so a run that stops between shards resumes each
    where it stood."""

    shard = models.IntegerField(primary_key=True)
    minutes_until = models.DateTimeField()
    hours_until = models.DateTimeField()

    def __str__(self):
        return f"shard {self.shard}: minutes until {self.minutes_until}"


class HoursWritten(models.Model):
    """A shard's pass wrote GPU hours from `at` on: the fleet's hours and days are summed
    again from there. Inserted in the pass's own transaction and taken (deleted) by the
    refresh after it, so an hour written while another refresh ran is not lost."""

    shard = models.IntegerField()
    at = models.DateTimeField()

    def __str__(self):
        return f"shard {self.shard}: hours written from {self.at}"


class GpuBusy(models.Model):
    """Each GPU's newest minute rolled up in which a sample was over the active threshold
    (`ACTIVE_UTILISATION_PCT` when it was rolled up, as a rollup's `busy_s`), written by the
    minute rollup and never moved back: the staff dashboard's idle list reads one row per
    GPU here instead of each GPU's last hours of minutes."""

    gpu = models.OneToOneField(Gpu, primary_key=True, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()

    def __str__(self):
        return f"{self.gpu_id} busy {self.at}"


class FleetRollup(models.Model):
    """The hour and day rollups summed per GPU model and region: a handful of rows per
    bucket where the GPU rollups have hundreds, so the staff dashboard's long ranges read
    these. Minutes are written by each shard's pass over the raw samples, a row per shard
    (`shard`; readers sum them); hours and days from the GPU hours and days, shard 0.
    `busy_gpus` counts GPUs whose average utilisation in the bucket was over the active
    threshold."""

    bucket = models.CharField(max_length=6, choices=RollupBucket.choices)
    shard = models.IntegerField(default=0)
    at = models.DateTimeField()
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.CASCADE, related_name="+")
    region = models.ForeignKey(Region, on_delete=models.CASCADE, related_name="+")
    gpus = models.PositiveIntegerField()
    busy_gpus = models.PositiveIntegerField()
    samples = models.BigIntegerField()
    util_sum = models.FloatField()  # utilisation × samples, for the average
    util_samples = models.BigIntegerField()
    covered_s = models.FloatField()
    busy_s = models.FloatField()
    energy_j = models.FloatField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bucket", "at", "gpu_model", "region", "shard"],
                name="telemetry_fleetrollup_once",
            ),
            choices_check("bucket", RollupBucket, name="telemetry_fleetrollup_bucket_valid"),
            models.CheckConstraint(
                condition=models.Q(busy_gpus__lte=models.F("gpus")),
                name="telemetry_fleetrollup_busy_within_gpus",
            ),
        ]

    def __str__(self):
        return f"{self.gpu_model_id}/{self.region_id} {self.bucket} {self.at}"


class FleetSize(models.Model):
    """How many GPUs the fleet had, per hour (the largest of the hour's polling rounds): the
    "total" line of the fleet over time comes from these, never from today's count drawn
    across the past."""

    at = models.DateTimeField(unique=True, help_text="the hour's start")
    gpus = models.PositiveIntegerField(help_text="most GPUs on active nodes in a round")
    reporting = models.PositiveIntegerField(
        null=True, help_text="fewest GPUs that answered a round; null: no round polled yet"
    )

    def __str__(self):
        return f"{self.gpus} GPUs at {self.at}"


class FlagKind(models.TextChoices):
    STOPPED_BUT_ACTIVE = "stopped_active", _("activity on a stopped allocation")
    UNALLOCATED_ACTIVE = "unallocated_active", _("activity on an unallocated GPU")
    XID = "xid", _("XID error")
    HOT = "hot", _("temperature over threshold")
    GPU_MISSING = "gpu_missing", _("GPU missing from the exporter")
    NODE_UNREACHABLE = "node_unreachable", _("node cannot be polled")
    AGENT_SILENT = "agent_silent", _("node agent not heard from")
    ENGINE_UNREACHABLE = "engine_unreachable", _("telemetry engine cannot be read")
    RAS = "ras", _("uncorrectable memory error (RAS)")


class Severity(models.TextChoices):
    INFO = "info", _("info")
    WARNING = "warning", _("warning")
    CRITICAL = "critical", _("critical")


SEVERITY = {
    FlagKind.STOPPED_BUT_ACTIVE: Severity.WARNING,
    FlagKind.UNALLOCATED_ACTIVE: Severity.WARNING,
    FlagKind.XID: Severity.CRITICAL,
    FlagKind.HOT: Severity.WARNING,
    FlagKind.GPU_MISSING: Severity.CRITICAL,
    FlagKind.NODE_UNREACHABLE: Severity.CRITICAL,
    # A silent agent applies no stop and no key change (it still revokes at paid_until).
    FlagKind.AGENT_SILENT: Severity.CRITICAL,
    # Nothing is ingested or judged while the operator's engine cannot be read (its minutes
    # are caught up when it answers again); nodes keep the health they had.
    FlagKind.ENGINE_UNREACHABLE: Severity.CRITICAL,
    # AMD's RAS: uncorrectable ECC errors since the driver loaded; the GPU needs a reset.
    FlagKind.RAS: Severity.CRITICAL,
}

# Flags a reading holds open while it lasts (closed by the first reading without it); an
# XID is an event instead, closed after a quiet time or by staff. The activity flags
# compare use with allocation states, which only the rentals layer knows.
READING_FLAGS = (FlagKind.HOT, FlagKind.GPU_MISSING, FlagKind.NODE_UNREACHABLE, FlagKind.RAS)
ACTIVITY_FLAGS = (FlagKind.STOPPED_BUT_ACTIVE, FlagKind.UNALLOCATED_ACTIVE)


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Flag(models.Model):  # type: ignore[django-manager-missing]
    """A condition staff should look at, on a node or one of its GPUs: opened once, seen
    again (`last_seen_at`), closed when it clears. Staff acknowledge a flag with a note; an
    acknowledged XID closes (it is an event), while a condition that still holds stays open,
    marked as seen by staff. Never deleted: closed flags are the history."""

    # No node: a flag on the telemetry source itself (the operator's engine).
    node = models.ForeignKey(
        Node, null=True, blank=True, on_delete=models.CASCADE, related_name="flags"
    )
    gpu = models.ForeignKey(
        Gpu, null=True, blank=True, on_delete=models.CASCADE, related_name="flags"
    )
    kind = models.CharField(max_length=20, choices=FlagKind.choices)
    severity = models.CharField(max_length=10, choices=Severity.choices)
    detail = models.CharField(max_length=200, blank=True)
    # The XID code of an XID flag (the last one seen), so a reader can tell a fatal one.
    code = models.IntegerField(null=True, blank=True)
    opened_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "gpu", "kind"],
                condition=models.Q(closed_at__isnull=True),
                nulls_distinct=False,
                name="telemetry_flag_one_open",
            ),
            choices_check("kind", FlagKind, name="telemetry_flag_kind_valid"),
            choices_check("severity", Severity, name="telemetry_flag_severity_valid"),
            models.CheckConstraint(
                condition=models.Q(last_seen_at__gte=models.F("opened_at")),
                name="telemetry_flag_seen_after_opened",
            ),
        ]
        indexes = [
            models.Index(
                fields=["-opened_at"],
                condition=models.Q(closed_at__isnull=True),
                name="telemetry_flag_open",
            ),
            # The flags page's history, newest first: its page read from the index rather
            # than every closed flag sorted (they only accumulate).
            models.Index(
                fields=["-opened_at", "-id"],
                condition=models.Q(closed_at__isnull=False),
                name="telemetry_flag_closed",
            ),
        ]

    def __str__(self):
        return f"{self.kind} on {self.gpu_id or self.node_id}"


class NodeAgent(models.Model):
    """A node's agent: the credential it pulls its desired state with (only the hash is
    kept), the state it was last served and the state it last said it applied.

    Desired state in, report out: AnchorGPU never needs to reach a node. An allocation's
    access is what the applied state says of it (rentals.access)."""

    node = models.OneToOneField(Node, on_delete=models.CASCADE, related_name="agent")
    key_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    hint = models.CharField(max_length=12, blank=True)
    issued_at = models.DateTimeField(null=True, blank=True)
    issued_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )  # fmt: skip
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # What the node was last served (its generation is the state's digest, also its ETag)…
    served_generation = models.CharField(max_length=32, blank=True)
    served_state = models.JSONField(null=True, blank=True)
    served_at = models.DateTimeField(null=True, blank=True)
    # …and what it last reported applied, with the errors it met.
    applied_generation = models.CharField(max_length=32, blank=True)
    applied_state = models.JSONField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True)
    agent_version = models.CharField(max_length=40, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(key_hash__isnull=True) | Q(revoked_at__isnull=True),
                name="telemetry_nodeagent_revoked_has_no_key",
            )
        ]

    def __str__(self):
        return f"agent of {self.node_id}"


class IngestMark(models.Model):
    """How far a node's samples have been ingested from the operator's engine
    (TELEMETRY_SOURCE=prometheus): every minute before `ingested_until` is in the samples
    table. A shard's minutes are replaced whole, so pulling one again changes nothing."""

    node = models.OneToOneField(Node, primary_key=True, on_delete=models.CASCADE, related_name="+")
    ingested_until = models.DateTimeField()

    def __str__(self):
        return f"{self.node_id} until {self.ingested_until}"


class SamplesRewritten(models.Model):
    """Raw samples were replaced from `at` on (an ingest re-pulled minutes the rollups may
    have read already): the next rollup run starts there. Taken and deleted by the rollup."""

    at = models.DateTimeField()

    def __str__(self):
        return f"samples rewritten from {self.at}"
