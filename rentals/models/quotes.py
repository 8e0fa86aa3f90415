"""Quotes: complete, priced offers that a booking or an extension charges exactly."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils.translation import gettext_lazy as _

from accounts.models import Team
from catalog.models import GpuModel, Option, Region, RentalPeriod
from catalog.software import Requires, validate_version
from core.db import choices_check
from core.money import CurrencyField, MoneyField
from core.vat import TaxTreatment, legal_note


class QuoteKind(models.TextChoices):
    BOOKING = "booking", _("booking")
    EXTENSION = "extension", _("extension")


class HostShare:
    """The host's share sold with the GPUs (`vcpus_per_gpu`, `ram_gib_per_gpu` fields), for
    the GPUs it comes with (`gpu_count`)."""

    # The model's fields these read (no fields of its own: Django sees none here).
    vcpus_per_gpu: int
    ram_gib_per_gpu: int
    gpu_count: int

    @property
    def vcpus(self) -> int:
        return self.vcpus_per_gpu * self.gpu_count

    @property
    def ram_gib(self) -> int:
        return self.ram_gib_per_gpu * self.gpu_count


class Quote(HostShare, models.Model):
    """A complete, priced offer; a snapshot that no later price change alters. A booking
    quote becomes an allocation; an extension quote (`extends`) adds its periods to one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    gpu_model = models.ForeignKey(GpuModel, on_delete=models.PROTECT, related_name="+")
    gpu_count = models.PositiveSmallIntegerField()
    # Whole nodes of one network group for one window (a cluster); empty for GPUs on one node.
    node_count = models.PositiveSmallIntegerField(null=True, blank=True)
    period = models.ForeignKey(RentalPeriod, on_delete=models.PROTECT, related_name="+")
    period_count = models.PositiveSmallIntegerField()
    # The region the customer chose: the booking places only on its nodes. Empty: any region.
    region = models.ForeignKey(
        Region, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    # The minimum versions the customer asked of the node's software stack (empty: none):
    # the booking places only on nodes that meet them, as it does for `region`.
    requires_driver = models.CharField(
        max_length=40, blank=True, default="", db_default="", validators=[validate_version]
    )
    requires_cuda = models.CharField(
        max_length=40, blank=True, default="", db_default="", validators=[validate_version]
    )
    requires_rocm = models.CharField(
        max_length=40, blank=True, default="", db_default="", validators=[validate_version]
    )
    paid_from = models.DateTimeField()
    paid_until = models.DateTimeField()
    starts_now = models.BooleanField(default=True)
    # Prices are net; VAT by the team's treatment when quoted (core.vat). `total` is the
    # gross, what the booking charges: net_total + vat_total.
    tax_treatment = models.CharField(max_length=16, choices=TaxTreatment.choices)
    vat_rate = models.DecimalField(max_digits=5, decimal_places=4)
    net_total = MoneyField()
    vat_total = MoneyField()
    total = MoneyField()
    currency = CurrencyField()
    created_at = models.DateTimeField(auto_now_add=True)
    valid_until = models.DateTimeField()
    kind = models.CharField(max_length=10, choices=QuoteKind.choices, default=QuoteKind.BOOKING)
    extends = models.ForeignKey(
        "rentals.Allocation",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="extension_quotes",
    )
    used_at = models.DateTimeField(null=True, blank=True)  # an extension quote, charged once
    # The host's share that comes with each GPU, as the catalog had it (snapshot).
    vcpus_per_gpu = models.PositiveSmallIntegerField(_("vCPUs per GPU"))
    ram_gib_per_gpu = models.PositiveIntegerField(_("RAM per GPU (GiB)"))

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(vcpus_per_gpu__gte=1, ram_gib_per_gpu__gte=1),
                name="rentals_quote_host_share_positive",
            ),
            choices_check("kind", QuoteKind, name="rentals_quote_kind_valid"),
            models.CheckConstraint(
                condition=Q(kind=QuoteKind.EXTENSION, extends__isnull=False)
                | Q(kind=QuoteKind.BOOKING, extends__isnull=True),
                name="rentals_quote_extension_extends_an_allocation",
            ),
            models.CheckConstraint(
                condition=Q(paid_from__lt=F("paid_until")), name="rentals_quote_period_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(total__gte=0), name="rentals_quote_total_not_negative"
            ),
            choices_check("tax_treatment", TaxTreatment, name="rentals_quote_tax_treatment_valid"),
            models.CheckConstraint(
                condition=Q(total=F("net_total") + F("vat_total"), vat_total__gte=0),
                name="rentals_quote_total_is_net_plus_vat",
            ),
            models.CheckConstraint(
                condition=Q(vat_rate__gte=0, vat_rate__lt=1), name="rentals_quote_vat_rate_range"
            ),
            models.CheckConstraint(
                condition=Q(gpu_count__gte=1), name="rentals_quote_gpu_count_positive"
            ),
            models.CheckConstraint(
                condition=Q(period_count__gte=1), name="rentals_quote_period_count_positive"
            ),
            models.CheckConstraint(
                condition=Q(node_count__isnull=True) | Q(node_count__gte=1),
                name="rentals_quote_node_count_positive",
            ),
        ]

    def __str__(self):
        return f"Quote {self.id}"

    @property
    def requires(self) -> Requires:
        """The stack minimums as one value (catalog.software.Requires)."""
        return Requires.of(self)

    @property
    def tax_note(self) -> str:
        """The words a treatment without VAT carries (reverse charge, not taxable here)."""
        return legal_note(self.tax_treatment)

    @property
    def vat_percent(self):
        return (self.vat_rate * 100).normalize()


class QuoteLineKind(models.TextChoices):
    GPU = "gpu", _("GPUs")
    OPTION = "option", _("option")


class QuoteLine(models.Model):
    """One priced line, kept as facts (GPUs or which option, how many, for how many periods)
    and put into words in the reader's language when shown (`rentals.texts`)."""

    quote = models.ForeignKey(
        Quote, on_delete=models.CASCADE, related_name="lines", db_index=False
    )  # found by the unique (quote, position)
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=10, choices=QuoteLineKind.choices)
    option = models.ForeignKey(Option, null=True, blank=True, on_delete=models.PROTECT)
    count = models.PositiveIntegerField(help_text="GPUs, or units of the option")
    periods = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="rental periods charged; empty for a one-time option"
    )
    quantity = models.PositiveIntegerField()
    unit_price = MoneyField()
    amount = MoneyField()  # net
    vat = MoneyField()  # this line's share of the quote's VAT (core.vat.vat_split)
    # What the customer said for an option that asks (catalog Option.input_label): which
    # image to set up, for example. Empty for every other line.
    note = models.CharField(max_length=200, blank=True, default="", db_default="")

    class Meta:
        ordering = ["quote", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["quote", "position"], name="rentals_quoteline_position"
            ),
            models.CheckConstraint(
                condition=Q(amount__gte=0), name="rentals_quoteline_amount_not_negative"
            ),
            choices_check("kind", QuoteLineKind, name="rentals_quoteline_kind_valid"),
            models.CheckConstraint(
                condition=Q(quantity=F("count") * Coalesce(F("periods"), 1)),
                name="rentals_quoteline_quantity_is_count_times_periods",
            ),
            models.CheckConstraint(
                condition=Q(kind=QuoteLineKind.GPU, option__isnull=True, periods__isnull=False)
                | Q(kind=QuoteLineKind.OPTION, option__isnull=False),
                name="rentals_quoteline_facts_match_kind",
            ),
        ]

    def __str__(self):
        return f"{self.kind} × {self.quantity}"
