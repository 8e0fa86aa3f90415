"""What can be rented: GPU models, rental periods, prices, options, and the fleet.

Words customers read (a period's or an option's name, a region, a model's link and notes)
are kept in each language (`name_en`, `name_pl`, edited side by side in the admin); `name`
reads the active language's and falls back to English where no translation was given.
"""

from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from translated_fields import TranslatedFieldWithFallback

from core.db import choices_check
from core.money import CurrencyField, MoneyField, amount_check


class Vendor(models.TextChoices):
    NVIDIA = "nvidia", "NVIDIA"
    AMD = "amd", "AMD"


class SoftwareStack(models.TextChoices):
    CUDA = "cuda", "CUDA"
    ROCM = "rocm", "ROCm"


class GpuModel(models.Model):
    """A kind of GPU that customers rent; specs as the vendor sells and the device reports them."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=80)
    vendor = models.CharField(max_length=10, choices=Vendor.choices)
    memory_gb = models.PositiveIntegerField(_("marketed memory (GB)"))
    memory_reported_mib = models.PositiveIntegerField(_("memory reported by the device (MiB)"))
    bandwidth_gbps = models.PositiveIntegerField(_("memory bandwidth (GB/s)"))
    stack = models.CharField(_("software stack"), max_length=10, choices=SoftwareStack.choices)
    compute_target = models.CharField(
        _("compute capability or gfx target"), max_length=20, help_text="9.0, 8.9, gfx942…"
    )
    fp8 = models.BooleanField(_("FP8"), default=False)
    bf16 = models.BooleanField(_("BF16"), default=True)
    interconnect = TranslatedFieldWithFallback(
        models.CharField(_("GPU-to-GPU link"), max_length=80, blank=True)
    )
    notes = TranslatedFieldWithFallback(models.TextField(_("notes"), blank=True))
    # The host's share that comes with each GPU: what a booking's quote snapshots and the
    # node agent enforces (CPU time and a memory limit on the allocation's groups).
    vcpus_per_gpu = models.PositiveSmallIntegerField(
        _("vCPUs per GPU"), help_text="CPU time of this many CPUs with each GPU rented"
    )
    ram_gib_per_gpu = models.PositiveIntegerField(
        _("RAM per GPU (GiB)"), help_text="the host memory that comes with each GPU rented"
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["-memory_gb", "name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(vcpus_per_gpu__gte=1, ram_gib_per_gpu__gte=1),
                name="catalog_gpumodel_host_share_positive",
            ),
            models.CheckConstraint(
                condition=Q(stack="cuda", vendor="nvidia") | Q(stack="rocm", vendor="amd"),
                name="catalog_gpumodel_stack_matches_vendor",
            ),
            choices_check("vendor", Vendor, name="catalog_gpumodel_vendor_valid"),
            choices_check("stack", SoftwareStack, name="catalog_gpumodel_stack_valid"),
        ]

    def __str__(self):
        return self.name


# The customer's fixed lengths: a day is 24 h, a week exactly 7 days, a month exactly 30.
FIXED_PERIODS = {"day": timedelta(days=1), "week": timedelta(days=7), "month": timedelta(days=30)}


class RentalPeriod(models.Model):
    """An exact duration (a month is 30 days, never a calendar month)."""

    slug = models.SlugField(unique=True)
    name = TranslatedFieldWithFallback(models.CharField(_("name"), max_length=40))
    duration = models.DurationField()
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["duration"]
        constraints = [
            models.CheckConstraint(
                condition=Q(duration__gte=timedelta(hours=1)),
                name="catalog_rentalperiod_duration_at_least_an_hour",
            ),
            *(
                models.CheckConstraint(
                    condition=~Q(slug=slug) | Q(duration=length),
                    name=f"catalog_rentalperiod_{slug}_is_{length.days}_days",
                    violation_error_message=f"A {slug} is exactly {length.days} × 24 hours.",
                )
                for slug, length in FIXED_PERIODS.items()
            ),
        ]

    def __str__(self):
        return self.name


class PriceRow(models.Model):
    """A price that takes effect at `effective_from`; later rows supersede, none is edited."""

    unit_price = MoneyField()
    currency = CurrencyField()
    effective_from = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        abstract = True
        ordering = ["-effective_from"]

    def clean(self):
        try:
            amount_check(self.unit_price, self.currency)
        except ValidationError as exc:
            raise ValidationError({"unit_price": exc.messages}) from exc


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class GpuPrice(PriceRow):  # type: ignore[django-manager-missing]
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="prices")
    period = models.ForeignKey(RentalPeriod, on_delete=models.PROTECT, related_name="+")

    class Meta(PriceRow.Meta):
        permissions = [("change_prices", "Can change prices")]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "period", "effective_from"],
                name="catalog_gpuprice_one_per_instant",
            ),
            models.CheckConstraint(condition=Q(unit_price__gt=0), name="catalog_gpuprice_positive"),
        ]
        indexes = [models.Index(fields=["gpu_model", "period", "-effective_from"])]

    def __str__(self):
        return f"{self.gpu_model} / {self.period}: {self.unit_price} {self.currency}"


class OptionBilling(models.TextChoices):
    PER_PERIOD = "per_period", _("per period")
    ONE_TIME = "one_time", _("one-time")


class Option(models.Model):
    """A priced add-on to a rental: per period (like the GPUs) or charged once."""

    slug = models.SlugField(unique=True)
    name = TranslatedFieldWithFallback(models.CharField(_("name"), max_length=80))
    description = TranslatedFieldWithFallback(models.TextField(_("description"), blank=True))
    unit = TranslatedFieldWithFallback(
        models.CharField(_("unit"), max_length=20, help_text=_("TB, address, setup…"))
    )
    billing = models.CharField(max_length=12, choices=OptionBilling.choices)
    max_quantity = models.PositiveIntegerField(default=1)
    # What the customer must say when choosing it (empty: nothing), e.g. which image to set
    # up; the quote keeps the answer on its line.
    input_label = TranslatedFieldWithFallback(
        models.CharField(
            _("asks for"), max_length=120, blank=True, default="", db_default="",
            help_text=_("What the customer types when choosing it (empty: nothing), "
                        "e.g. “Image to set up (registry reference)”."),
        )
    )  # fmt: skip
    # How long before the start it must be booked (zero: it can start now).
    lead_time = models.DurationField(
        _("lead time"), default=timedelta(0), db_default=timedelta(0),
        help_text=_("How long before the paid period's start it must be booked; "
                    "zero: it can start at once."),
    )  # fmt: skip
    gpu_models = models.ManyToManyField(
        GpuModel, blank=True, related_name="options", help_text=_("Empty: every model.")
    )
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name_en"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_quantity__gte=1), name="catalog_option_max_quantity_positive"
            ),
            choices_check("billing", OptionBilling, name="catalog_option_billing_valid"),
            models.CheckConstraint(
                condition=Q(lead_time__gte=timedelta(0)),
                name="catalog_option_lead_time_not_negative",
            ),
        ]

    def __str__(self):
        return self.name


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class OptionPrice(PriceRow):  # type: ignore[django-manager-missing]
    """Per-period options have a price per rental period; one-time options have period NULL."""

    option = models.ForeignKey(Option, on_delete=models.PROTECT, related_name="prices")
    period = models.ForeignKey(
        RentalPeriod, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta(PriceRow.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["option", "period", "effective_from"],
                nulls_distinct=False,
                name="catalog_optionprice_one_per_instant",
            ),
            models.CheckConstraint(
                condition=Q(unit_price__gte=0), name="catalog_optionprice_not_negative"
            ),
        ]

    def __str__(self):
        return f"{self.option} / {self.period or 'once'}: {self.unit_price} {self.currency}"


class PriceChange(models.Model):
    """Audit trail: who scheduled which price, when. Never edited."""

    at = models.DateTimeField(auto_now_add=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    subject = models.CharField(max_length=200)
    old_price = models.CharField(max_length=40, blank=True)
    new_price = models.CharField(max_length=40)
    effective_from = models.DateTimeField()

    class Meta:
        ordering = ["-at"]

    def __str__(self):
        return f"{self.at:%Y-%m-%d %H:%M} {self.subject}: {self.new_price}"


class Region(models.Model):
    slug = models.SlugField(unique=True)
    name = TranslatedFieldWithFallback(models.CharField(_("name"), max_length=80))

    class Meta:
        ordering = ["name_en"]

    def __str__(self):
        return self.name


class ExporterKind(models.TextChoices):
    DCGM = "dcgm", "NVIDIA dcgm-exporter"
    AMD = "amd", "AMD device metrics exporter"


class NodeState(models.TextChoices):
    ACTIVE = "active", _("active")
    MAINTENANCE = "maintenance", _("maintenance")
    RETIRED = "retired", _("retired")


class NodeHealth(models.TextChoices):
    UNKNOWN = "unknown", _("unknown")
    HEALTHY = "healthy", _("healthy")
    DEGRADED = "degraded", _("degraded")
    UNREACHABLE = "unreachable", _("unreachable")
    MALFORMED = "malformed", _("malformed")
    STALE = "stale", _("stale")


def validate_exporter_url(value: str) -> None:
    """http(s)://host[:port]/path; unlike URLField, internal single-label hostnames are fine."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(_("Enter an http:// or https:// URL with a host name."))
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError as exc:
        raise ValidationError(_("The port in this URL is not valid.")) from exc


class Node(models.Model):
    """A machine with GPUs of one model. Only active nodes take new bookings and are polled."""

    hostname = models.CharField(max_length=255, unique=True)
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="nodes")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="nodes")
    telemetry_url = models.CharField(max_length=500, validators=[validate_exporter_url])
    exporter = models.CharField(max_length=10, choices=ExporterKind.choices)
    metric_prefix = models.CharField(
        max_length=20, blank=True, help_text="amd_ for some AMD setups"
    )
    state = models.CharField(max_length=12, choices=NodeState.choices, default=NodeState.ACTIVE)
    health = models.CharField(max_length=12, choices=NodeHealth.choices, default=NodeHealth.UNKNOWN)
    # The network between nodes: a cluster (several whole nodes booked together) only spans
    # nodes of one network group; a node with no group is never part of a cluster.
    fabric = models.CharField(
        _("node-to-node fabric"),
        max_length=80,
        default="none",
        db_default="none",
        help_text="InfiniBand NDR 400 Gb/s × 8, RoCE 200 Gb/s, none…",
    )
    network_group = models.SlugField(
        _("network group"), max_length=40, blank=True, default="", db_default="",
        help_text="nodes one cluster may span",
    )  # fmt: skip
    health_detail = models.TextField(blank=True)
    # Kept by the database (migration 0008): recounted whenever the node's GPUs change and
    # whenever a save writes it, so a stale copy in memory never lands.
    gpu_count = models.PositiveSmallIntegerField(
        _("GPUs"), default=0, db_default=0, editable=False,
        help_text="the node's GPU rows, counted by the database",
    )  # fmt: skip
    last_poll_at = models.DateTimeField(null=True, blank=True)
    last_good_poll_at = models.DateTimeField(null=True, blank=True)
    # The start of the node's current unbroken run of polls (none missed for longer than a
    # staleness window): staleness is judged only from polls made since, never from a gap
    # the console itself caused (stopped, restarted, no worker polling). Written with its
    # health (telemetry.sql.NODES_HEALTH).
    polled_since = models.DateTimeField(null=True, blank=True)
    # Where tenants reach the node's SSH server (the connection details an allocation shows).
    ssh_host = models.CharField(
        _("SSH host"), max_length=255, blank=True, default="", db_default="",
        help_text="the name or address customers ssh to; empty: the hostname",
    )  # fmt: skip
    ssh_port = models.PositiveIntegerField(
        _("SSH port"), default=22, db_default=22,
        validators=[MinValueValidator(1), MaxValueValidator(65535)],
    )  # fmt: skip
    # The software stack its agent last reported (catalog.software): the GPU driver (NVIDIA's,
    # or amdgpu), the highest CUDA the driver supports, the ROCm release; empty is unknown.
    # Each version's key (its parts as integers) sits beside it, so availability and
    # placement compare versions in SQL (rentals.sql.capacity.stack_meets), never as strings.
    driver_version = models.CharField(
        _("driver version"), max_length=40, blank=True, default="", db_default=""
    )
    cuda_version = models.CharField(
        _("CUDA version"), max_length=40, blank=True, default="", db_default="",
        help_text="the highest CUDA version the driver supports (nvidia-smi's header)",
    )  # fmt: skip
    rocm_version = models.CharField(
        _("ROCm version"), max_length=40, blank=True, default="", db_default=""
    )
    driver_key = ArrayField(models.IntegerField(), null=True, blank=True, editable=False)
    cuda_key = ArrayField(models.IntegerField(), null=True, blank=True, editable=False)
    rocm_key = ArrayField(models.IntegerField(), null=True, blank=True, editable=False)
    software = models.JSONField(
        _("software stack"), default=dict, db_default={}, blank=True, editable=False,
        help_text="as the node's agent reported it: OS, kernel, each GPU's target",
    )  # fmt: skip
    software_reported_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The driver dcgm-exporter names in its DCGM_FI_DRIVER_VERSION label, where its CSV
    # declares one: shown beside the agent's (which wins) when the two disagree.
    exporter_driver_version = models.CharField(
        max_length=40, blank=True, default="", db_default="", editable=False
    )

    class Meta:
        ordering = ["hostname"]
        indexes = [models.Index(fields=["state", "gpu_model"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(network_group="") | ~Q(fabric="none"),
                name="catalog_node_grouped_nodes_have_a_fabric",
            ),
            choices_check("exporter", ExporterKind, name="catalog_node_exporter_valid"),
            choices_check("state", NodeState, name="catalog_node_state_valid"),
            models.CheckConstraint(
                condition=Q(ssh_port__gte=1, ssh_port__lte=65535),
                name="catalog_node_ssh_port_valid",
            ),
            choices_check("health", NodeHealth, name="catalog_node_health_valid"),
            # a version's key is there exactly when its version is known
            *(
                models.CheckConstraint(
                    condition=Q(**{f"{part}_version": "", f"{part}_key__isnull": True})
                    | (~Q(**{f"{part}_version": ""}) & Q(**{f"{part}_key__isnull": False})),
                    name=f"catalog_node_{part}_key_with_version",
                )
                for part in ("driver", "cuda", "rocm")
            ),
        ]

    def __str__(self):
        return self.hostname


class Gpu(models.Model):
    """One device; identified by the exporter's UUID (NVIDIA) or serial number (AMD)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(_("UUID or serial"), max_length=100, unique=True)

    class Meta:
        ordering = ["node_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="catalog_gpu_unique_index"),
            models.CheckConstraint(condition=~Q(uuid=""), name="catalog_gpu_uuid_not_empty"),
        ]

    def __str__(self):
        return f"{self.node.hostname}#{self.index}"
