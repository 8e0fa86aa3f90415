"""Allocations of specific GPUs for a paid period, the GPU holdings the database guards, and
the allocations' events."""

import uuid

from django.conf import settings
from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import BigIntegerRangeField, DateTimeRangeField, RangeOperators
from django.db import models
from django.db.models import F, Func, Q, Value
from django.utils.translation import gettext_lazy as _

from accounts.models import SshKey, Team
from catalog.models import Gpu, GpuModel, Node, RentalPeriod
from core.db import choices_check
from rentals.models.quotes import HostShare, Quote


class AllocationState(models.TextChoices):
    SCHEDULED = "scheduled", _("scheduled")
    RUNNING = "running", _("running")
    STOPPED = "stopped", _("stopped")
    EXPIRED = "expired", _("expired")
    CANCELLED = "cancelled", _("cancelled")


LIVE_STATES = (AllocationState.SCHEDULED, AllocationState.RUNNING, AllocationState.STOPPED)


class Cluster(models.Model):
    """Several whole nodes of one network group booked together by one quote, for one paid
    period: one allocation per node, charged once (on the first node's allocation) and
    cancelled or extended only as a whole. Its state and period are its allocations'."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    quote = models.OneToOneField(Quote, on_delete=models.PROTECT, related_name="cluster")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="+")
    node_count = models.PositiveSmallIntegerField()
    network_group = models.SlugField(max_length=40)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(node_count__gte=1), name="rentals_cluster_node_count_positive"
            ),
        ]

    def __str__(self):
        return f"{self.node_count} × {self.gpu_model} nodes ({self.network_group})"


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Allocation(HostShare, models.Model):  # type: ignore[django-manager-missing]
    """Specific GPUs on one node, held for [paid_from, paid_until).

    Stop and start change `state` only; a database trigger refuses any change of
    `paid_from`, any shortening of `paid_until`, and a `paid_until` change together with a
    state change (only an extension moves it).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Found by `rentals_allocation_team_from` (team, paid_from), which leads with it.
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="+", db_index=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # One allocation per quote, except a cluster's: one per node, all of the same quote. Found
    # by the unique (quote, node), which leads with it.
    quote = models.ForeignKey(
        Quote, on_delete=models.PROTECT, related_name="allocations", db_index=False
    )
    cluster = models.ForeignKey(
        Cluster, null=True, blank=True, on_delete=models.PROTECT, related_name="allocations"
    )
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
    # A mark, not a state: since when some held GPU cannot work (rentals.services.impairments);
    # null while all work. The paid period never moves for it.
    impaired_since = models.DateTimeField(null=True, blank=True)
    # The host's share sold with each GPU, as its quote had it (the node agent enforces it).
    vcpus_per_gpu = models.PositiveSmallIntegerField(_("vCPUs per GPU"))
    ram_gib_per_gpu = models.PositiveIntegerField(_("RAM per GPU (GiB)"))

    class Meta:
        ordering = ["-paid_from"]
        constraints = [
            models.CheckConstraint(
                condition=Q(vcpus_per_gpu__gte=1, ram_gib_per_gpu__gte=1),
                name="rentals_allocation_host_share_positive",
            ),
            models.CheckConstraint(
                condition=Q(paid_from__lt=F("paid_until")),
                name="rentals_allocation_period_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(gpu_count__gte=1), name="rentals_allocation_gpu_count_positive"
            ),
            choices_check("state", AllocationState, name="rentals_allocation_state_valid"),
            models.UniqueConstraint(
                fields=["quote"],
                condition=Q(cluster__isnull=True),
                name="rentals_allocation_one_per_quote",
            ),
            models.UniqueConstraint(
                fields=["quote", "node"], name="rentals_allocation_one_per_quote_node"
            ),
            # What a ledger row's (allocation, period) refers to (rentals 0026): a row naming
            # a period other than its allocation's is refused.
            models.UniqueConstraint(fields=["id", "period"], name="rentals_allocation_id_period"),
        ]
        indexes = [
            models.Index(fields=["team", "-paid_from"], name="rentals_allocation_team_from"),
            models.Index(fields=["state", "paid_until"]),
            models.Index(fields=["state", "paid_from"]),
            # The few marked impaired, for the impairment sweep and /metrics (rentals 0027).
            models.Index(
                fields=["impaired_since"],
                condition=Q(impaired_since__isnull=False),
                name="rentals_allocation_impaired",
            ),
        ]

    def __str__(self):
        return f"{self.gpu_count}× {self.gpu_model} on {self.node} ({self.state})"

    # Replaces, on purpose and with its signature, the one Django (and the plugin) add.
    def get_state_display(self) -> str:  # type: ignore[no-redef]
        # Django's builds a dict of every state's label and translates them all, per call
        # (50 rows a page of the list): only the one shown is translated here.
        return str(AllocationState(self.state).label)

    @property
    def is_live(self):
        return self.state in LIVE_STATES

    @property
    def current_holdings(self) -> list["AllocationGpu"]:
        """The holdings of the GPUs it has now: those that run to paid_until (a replacement
        or a move ended the others at its swap), read from `held` (prefetched where listed)."""
        return [h for h in self.held.all() if h.ends_at == self.paid_until]


class Int8Range(Func):
    function = "int8range"
    output_field = BigIntegerRangeField()


class TsTzRange(Func):
    function = "tstzrange"
    output_field = DateTimeRangeField()


class AllocationGpu(models.Model):
    """One GPU held for [starts_at, ends_at) by an allocation or by a maintenance window: the
    row the exclusion guards, so a booking and a window never hold a GPU at the same time,
    whichever commits first, and every free-window read (`rentals.sql.holdings.gpu_free`) sees both.

    `int8range(gpu_id, gpu_id, '[]') WITH =` needs no btree_gist, which the embedded
    PostgreSQL lacks. A cancelled allocation releases its rows, freeing the time. A GPU swap
    (a replacement, a move for maintenance) ends the old row at the swap and adds the new one
    up to paid_until, so an allocation's rows are its GPUs over time.
    """

    # Both holders are found by their unique pairs below, which lead with them (rentals 0032):
    # a holding writes no plain index of either.
    allocation = models.ForeignKey(
        Allocation, null=True, blank=True, on_delete=models.CASCADE, related_name="held",
        db_index=False,
    )  # fmt: skip
    maintenance = models.ForeignKey(
        "rentals.MaintenanceWindow", null=True, blank=True, on_delete=models.CASCADE,
        related_name="held", db_index=False,
    )  # fmt: skip
    gpu = models.ForeignKey(Gpu, on_delete=models.PROTECT, related_name="held")
    # The GPU's node, kept by the database (rentals 0028): set from the GPU on every insert
    # and rewritten when a GPU moves, so what a write passes (nothing) never counts. The
    # live holdings' index carries it, so "held now per node" reads no GPU rows.
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, related_name="+", editable=False,
        db_index=False,
    )  # fmt: skip
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
            # Only a window's holdings: an allocation's would each add an entry under NULL.
            models.UniqueConstraint(
                fields=["maintenance", "gpu"],
                condition=Q(maintenance__isnull=False),
                name="rentals_allocationgpu_once_per_window",
            ),
            models.CheckConstraint(
                condition=Q(allocation__isnull=False, maintenance__isnull=True)
                | Q(allocation__isnull=True, maintenance__isnull=False),
                name="rentals_allocationgpu_one_holder",
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
        indexes = [
            # The live holdings (maintenance's too) that end after an instant: availability's
            # calendar and start windows, the fleet report's steps and booked-ahead days
            # read only those, not a year of holdings.
            models.Index(
                fields=["ends_at"],
                include=["gpu", "starts_at", "allocation", "node"],
                condition=Q(released=False),
                name="rentals_ag_live_ends",
            ),
            # One node's live holdings from an instant on: "has some node room?" asks node
            # after node and stops at the first with room (rentals.sql.capacity.ROOM_EXISTS).
            models.Index(
                fields=["node", "ends_at"],
                include=["gpu", "starts_at"],
                condition=Q(released=False),
                name="rentals_ag_node_live",
            ),
        ]

    def __str__(self):
        return f"{self.gpu_id} [{self.starts_at}, {self.ends_at})"


class EventKind(models.TextChoices):
    """What happened to an allocation; the labels are the event history's words."""

    BOOKED = "booked", _("booked")
    STOP = "stop", _("stopped by the owner")
    START = "start", _("started")
    CANCEL = "cancel", _("cancelled, refunded")
    EXTEND = "extend", _("extended")
    EXPIRE = "expire", _("expired at paid-until")
    KEYS = "keys", _("SSH keys changed")
    ACCESS_GRANTED = "access_granted", _("access granted on the node")
    ACCESS_REVOKED = "access_revoked", _("access revoked on the node")
    MOVE = "move", _("moved to other GPUs for maintenance")
    IMPAIRED = "impaired", _("GPUs impaired by a provider's fault")
    RECOVERED = "recovered", _("GPUs working again")
    REPLACE = "replace", _("impaired GPUs replaced")


class AllocationEvent(models.Model):
    """A change of an allocation: who, when, from which state to which."""

    allocation = models.ForeignKey(Allocation, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    from_state = models.CharField(max_length=10, choices=AllocationState.choices, blank=True)
    to_state = models.CharField(max_length=10, choices=AllocationState.choices, blank=True)
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["allocation", "at", "id"]
        constraints = [
            choices_check("kind", EventKind, name="rentals_allocationevent_kind_valid"),
            choices_check(
                "from_state", AllocationState, blank=True, name="rentals_allocationevent_from_valid"
            ),
            choices_check(
                "to_state", AllocationState, blank=True, name="rentals_allocationevent_to_valid"
            ),
        ]
        # The fleet report's stopped GPU-hours: each stop, and the first event after it
        # that leaves "stopped", both read from these alone (reports.sql.FLEET_REPORT_NOW).
        indexes = [
            models.Index(
                fields=["allocation", "at", "id"], condition=Q(to_state=AllocationState.STOPPED),
                name="rentals_event_stops",
            ),
            models.Index(
                fields=["allocation", "at", "id"], condition=Q(from_state=AllocationState.STOPPED),
                name="rentals_event_stop_ends",
            ),
        ]  # fmt: skip

    def __str__(self):
        return f"{self.kind} at {self.at}"

    @property
    def kind_label(self):
        return self.get_kind_display()

    @property
    def from_label(self):
        return self.get_from_state_display()

    @property
    def to_label(self):
        return self.get_to_state_display()


class AllocationKey(models.Model):
    """An SSH key an allocation lets in while it runs: its node's agent writes the keys of
    the allocation's members into the tenant's authorized_keys. A key deleted by its owner
    goes from every allocation with it."""

    allocation = models.ForeignKey(
        Allocation, on_delete=models.CASCADE, related_name="keys", db_index=False
    )  # found by the unique (allocation, ssh_key)
    ssh_key = models.ForeignKey(SshKey, on_delete=models.CASCADE, related_name="+")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["allocation", "ssh_key"]
        constraints = [
            models.UniqueConstraint(
                fields=["allocation", "ssh_key"], name="rentals_allocationkey_once"
            )
        ]

    def __str__(self):
        return f"{self.ssh_key_id} on {self.allocation_id}"
