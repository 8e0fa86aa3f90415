from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.api.serializers import in_language
from catalog.models import GpuModel, Option, Region, RentalPeriod, SoftwareStack, Vendor
from catalog.software import version_error
from core.fields import BoundedDateTimeField, FieldsBuiltOnce, MoneyAmountField
from core.money import DECIMAL_PLACES, MAX_DIGITS
from rentals import limits
from rentals.access import access_of
from rentals.models import (
    Allocation,
    AllocationEvent,
    AllocationState,
    ExportState,
    LedgerEntry,
    LedgerKind,
    Quote,
    QuoteLine,
    StatementExport,
)
from rentals.texts import ledger_entry_text, quote_line_text


class PeriodCountField(serializers.IntegerField):
    """1 to MAX_PERIOD_COUNT, read when validating (rentals.limits)."""

    def __init__(self, **kwargs):
        super().__init__(min_value=1, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if refusal := limits.period_count_refusal(value):
            raise serializers.ValidationError(refusal)
        return value


class PriceSerializer(serializers.Serializer):
    period = serializers.CharField(source="period.slug")
    unit_price = MoneyAmountField()
    currency = serializers.CharField()
    effective_from = serializers.DateTimeField()


class SoftwareVersionCountSerializer(serializers.Serializer):
    version = serializers.CharField()
    gpus = serializers.IntegerField(help_text="GPUs on active nodes with this version")
    regions = serializers.ListField(child=serializers.SlugField(), help_text="where (slugs)")


class GpuModelSoftwareSerializer(serializers.Serializer):
    drivers = SoftwareVersionCountSerializer(many=True, help_text="GPU driver versions")
    cuda = SoftwareVersionCountSerializer(
        many=True, help_text="the highest CUDA version each node's driver supports"
    )
    rocm = SoftwareVersionCountSerializer(many=True, help_text="ROCm releases")
    unknown_gpus = serializers.IntegerField(help_text="GPUs whose node's stack is unknown")


class GpuModelSerializer(serializers.ModelSerializer):
    interconnect = in_language("The GPU-to-GPU link")
    notes = in_language("What to know before renting it")
    prices = PriceSerializer(source="current_prices", many=True)
    free_gpus_now = serializers.IntegerField()
    free_gpus_as_of = serializers.DateTimeField(
        allow_null=True,
        help_text="when `free_gpus_now` is from the capacity summary a worker keeps, the instant "
        "it is as of (bookings since then are not counted yet; a booking checks again); null "
        "when read from the holdings at the request",
    )
    software = GpuModelSoftwareSerializer(
        help_text="the driver, CUDA and ROCm versions of the model's active nodes"
    )

    class Meta:
        model = GpuModel
        fields = [
            "slug",
            "name",
            "vendor",
            "memory_gb",
            "memory_reported_mib",
            "bandwidth_gbps",
            "stack",
            "compute_target",
            "fp8",
            "bf16",
            "interconnect",
            "notes",
            "vcpus_per_gpu",
            "ram_gib_per_gpu",
            "prices",
            "free_gpus_now",
            "free_gpus_as_of",
            "software",
        ]


class GpuModelFilterSerializer(serializers.Serializer):
    vendor = serializers.ChoiceField(choices=Vendor.values, required=False)
    min_memory_gb = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    stack = serializers.ChoiceField(choices=SoftwareStack.values, required=False)
    fp8 = serializers.BooleanField(required=False, allow_null=True, default=None)
    max_price = serializers.DecimalField(
        max_digits=MAX_DIGITS, decimal_places=DECIMAL_PLACES, min_value=0, required=False
    )
    price_period = serializers.SlugField(required=False)
    ordering = serializers.ChoiceField(
        choices=["name", "-name", "memory_gb", "-memory_gb", "bandwidth_gbps", "-bandwidth_gbps"],
        required=False,
    )


class AllocationFilterSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=AllocationState.choices, required=False)
    user = serializers.CharField(max_length=150, required=False, help_text="owner (staff)")
    gpu_model = serializers.SlugField(required=False)
    node = serializers.CharField(max_length=255, required=False, help_text="hostname")


class LedgerFilterSerializer(serializers.Serializer):
    since = serializers.DateField(required=False, help_text="first day (UTC), inclusive")
    until = serializers.DateField(required=False, help_text="last day (UTC), inclusive")
    kind = serializers.ChoiceField(choices=LedgerKind.choices, required=False)

    def validate(self, data):
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise serializers.ValidationError({"until": _("The end comes before the start.")})
        return data


class TelemetryQuerySerializer(serializers.Serializer):
    start = BoundedDateTimeField(required=False)
    end = BoundedDateTimeField(required=False)

    def validate(self, data):
        if data.get("start") and data.get("end") and data["start"] >= data["end"]:
            raise serializers.ValidationError({"from": _("`from` must be before `to`.")})
        return data


class QuoteOptionInSerializer(serializers.Serializer):
    option = serializers.SlugField()
    quantity = serializers.IntegerField(
        min_value=1, max_value=limits.OPTION_QUANTITY_MAX, default=1
    )
    input = serializers.CharField(
        required=False, max_length=200, allow_blank=True,
        help_text="what an option that asks for it needs (its `input_label` in "
        "/api/v1/options/), e.g. the image to set up",
    )  # fmt: skip


class RequiresVersionField(serializers.CharField):
    """A minimum version of the node's stack: dotted numbers, compared as versions."""

    def __init__(self, **kwargs):
        super().__init__(
            required=False, allow_blank=True, allow_null=True, default="", max_length=40,
            validators=[_version_valid], **kwargs,
        )  # fmt: skip

    def to_internal_value(self, data):
        return (super().to_internal_value(data) or "").strip()


def _version_valid(value: str) -> None:
    if value and (error := version_error(value)):
        raise serializers.ValidationError(error)


class QuoteInSerializer(serializers.Serializer):
    gpu_model = serializers.SlugField()
    gpu_count = serializers.IntegerField(
        min_value=1, max_value=limits.GPU_COUNT_MAX, required=False,
        help_text="GPUs on one node (or `node_count`)",
    )  # fmt: skip
    node_count = serializers.IntegerField(
        min_value=1, max_value=limits.NODE_COUNT_MAX, required=False,
        help_text="whole nodes of one network group for the same window: a cluster "
        "(or `gpu_count`); the GPU line is node_count × GPUs per node",
    )  # fmt: skip
    period = serializers.SlugField()
    period_count = PeriodCountField()
    starts_at = BoundedDateTimeField(required=False, allow_null=True, default=None)
    # many=True hands max_length to the ListSerializer; the stubs' __init__ omits it.
    options = QuoteOptionInSerializer(  # type: ignore[call-arg]
        many=True, required=False, default=list, max_length=limits.OPTIONS_MAX
    )
    region = serializers.SlugField(
        required=False, allow_null=True, default=None,
        help_text="place only on nodes of this region (slug, as in /api/v1/regions/); "
        "empty: any region",
    )  # fmt: skip
    requires_driver = RequiresVersionField(
        help_text="place only on nodes whose GPU driver is at least this version (550.54.15)"
    )
    requires_cuda = RequiresVersionField(
        help_text="place only on nodes whose driver supports at least this CUDA version (12.8)"
    )
    requires_rocm = RequiresVersionField(
        help_text="place only on nodes with at least this ROCm release (6.2)"
    )

    def validate(self, data):
        if ("gpu_count" in data) == ("node_count" in data):
            raise serializers.ValidationError(
                {"gpu_count": _("Ask for either a GPU count or a node count.")}
            )
        return data


class QuoteLineSerializer(serializers.ModelSerializer):
    option: "serializers.RelatedField[Option, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    )
    description = serializers.SerializerMethodField(
        help_text="The line in words, in the language asked for (Accept-Language or ?lang=)"
    )
    periods = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="empty for a one-time option"
    )
    unit_price = MoneyAmountField(currency_source="quote.currency", help_text="net")
    amount = MoneyAmountField(currency_source="quote.currency", help_text="net")
    vat = MoneyAmountField(
        currency_source="quote.currency", help_text="this line's share of the quote's VAT"
    )

    class Meta:
        model = QuoteLine
        fields = [
            "kind", "option", "count", "periods", "description", "quantity", "unit_price",
            "amount", "vat", "note",
        ]  # fmt: skip

    def get_description(self, line) -> str:
        return quote_line_text(line)


class QuoteSerializer(serializers.ModelSerializer):
    team = serializers.IntegerField(source="team_id", read_only=True)
    extends = serializers.UUIDField(source="extends_id", read_only=True, allow_null=True)
    gpu_model: "serializers.RelatedField[GpuModel, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True)
    )
    period: "serializers.RelatedField[RentalPeriod, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True)
    )
    region: "serializers.RelatedField[Region, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(
            slug_field="slug",
            read_only=True,
            allow_null=True,
            help_text="the region the booking places in; null: any region",
        )
    )
    lines = QuoteLineSerializer(many=True, read_only=True)
    net_total = MoneyAmountField(help_text="the lines' sum: catalog prices are net")
    vat_rate = serializers.DecimalField(max_digits=5, decimal_places=4, read_only=True)
    vat_total = MoneyAmountField(help_text="VAT on the net total, rounded once")
    tax_treatment = serializers.CharField(
        read_only=True, help_text="domestic, reverse_charge, outside_eu or consumer"
    )
    tax_note = serializers.CharField(
        read_only=True, help_text="the legal note of a treatment without VAT, else empty"
    )
    total = MoneyAmountField(help_text="gross: what the booking charges")

    class Meta:
        model = Quote
        fields = [
            "id",
            "team",
            "kind",
            "extends",
            "gpu_model",
            "gpu_count",
            "node_count",
            "period",
            "period_count",
            "region",
            "requires_driver",
            "requires_cuda",
            "requires_rocm",
            "vcpus_per_gpu",
            "ram_gib_per_gpu",
            "lines",
            "net_total",
            "tax_treatment",
            "vat_rate",
            "vat_total",
            "tax_note",
            "total",
            "currency",
            "paid_from",
            "paid_until",
            "starts_now",
            "valid_until",
            "created_at",
        ]
        read_only_fields = fields


class BookingInSerializer(serializers.Serializer):
    quote = serializers.UUIDField()
    ssh_keys = serializers.ListField(
        child=serializers.IntegerField(min_value=1), required=False, max_length=20,
        help_text="ids of your SSH keys the allocation lets in (default: all of yours)",
    )  # fmt: skip


class AllocationKeysInSerializer(serializers.Serializer):
    ssh_keys = serializers.ListField(
        child=serializers.IntegerField(min_value=1), max_length=20, allow_empty=True,
        help_text="the keys it lets in from now on: yours, or ones it already had",
    )  # fmt: skip


class ExtensionQuoteInSerializer(serializers.Serializer):
    period_count = PeriodCountField()


class ExtendInSerializer(serializers.Serializer):
    """An extension quote to charge (preferred), or a period count to price and charge now."""

    quote = serializers.UUIDField(required=False)
    period_count = PeriodCountField(required=False)

    def validate(self, data):
        if ("quote" in data) == ("period_count" in data):
            raise serializers.ValidationError(_("Send either `quote` or `period_count`."))
        return data


class EventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField()

    class Meta:
        model = AllocationEvent
        fields = ["at", "kind", "from_state", "to_state", "actor", "note"]

    def get_actor(self, obj) -> str | None:
        return obj.actor.username if obj.actor_id else None


class GpuRefSerializer(serializers.Serializer):
    uuid = serializers.CharField(source="gpu.uuid")
    index = serializers.IntegerField(source="gpu.index")


class AccessSerializer(serializers.Serializer):
    state = serializers.ChoiceField(
        choices=["scheduled", "pending", "ready", "revoking", "revoked"],
        help_text="ready once the node's agent applied what the allocation needs now; "
        "pending until then; revoking, then revoked, after a stop, an expiry or a cancel",
    )
    detail = serializers.CharField(help_text="what the node's agent reported failing, if anything")
    host = serializers.CharField()
    port = serializers.IntegerField()
    username = serializers.CharField(help_text="the allocation's login on its node")
    ssh_command = serializers.CharField()
    keys = serializers.ListField(
        child=serializers.CharField(), help_text="fingerprints of the SSH keys it lets in"
    )
    agent_seen_at = serializers.DateTimeField(
        allow_null=True, help_text="when the node's agent last asked for its state"
    )


class AllocationListSerializer(serializers.ListSerializer):
    """Judges the access of every allocation listed at once (a constant number of queries)."""

    def to_representation(self, data):
        allocations = list(data.all() if hasattr(data, "all") else data)
        known = self.child.context.get("access") or {}
        if any(a.pk not in known for a in allocations):
            self.child.context["access"] = known | access_of(allocations)
        return super().to_representation(allocations)


class AllocationSerializer(FieldsBuiltOnce, serializers.ModelSerializer):
    team = serializers.IntegerField(source="team_id", read_only=True)
    gpu_model: "serializers.RelatedField[GpuModel, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True)
    )
    period: "serializers.RelatedField[RentalPeriod, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", read_only=True)
    )
    node = serializers.CharField(source="node.hostname", read_only=True)
    region = serializers.CharField(source="node.region.slug", read_only=True)
    owner = serializers.CharField(source="user.username", read_only=True)
    gpus = GpuRefSerializer(
        source="current_holdings", many=True, read_only=True,
        help_text="the GPUs it holds now (a replacement or a move swaps them: see `events`)",
    )  # fmt: skip
    events = EventSerializer(many=True, read_only=True)
    cluster = serializers.UUIDField(source="cluster_id", read_only=True, allow_null=True)
    access = serializers.SerializerMethodField()

    class Meta:
        model = Allocation
        list_serializer_class = AllocationListSerializer
        fields = [
            "id",
            "team",
            "state",
            "owner",
            "gpu_model",
            "gpu_count",
            "period",
            "node",
            "region",
            "gpus",
            "vcpus_per_gpu",
            "ram_gib_per_gpu",
            "paid_from",
            "paid_until",
            "impaired_since",
            "quote",
            "cluster",
            "created_at",
            "events",
            "access",
        ]
        read_only_fields = fields

    @extend_schema_field(AccessSerializer)
    def get_access(self, allocation) -> dict:
        known = self.context.get("access") or {}
        access = known.get(allocation.pk) or access_of([allocation])[allocation.pk]
        return AccessSerializer(access).data


class BookingSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    allocation = AllocationSerializer(help_text="the allocation (a cluster's first node)")
    allocations = AllocationSerializer(many=True, help_text="every node's allocation")
    cluster = serializers.UUIDField(allow_null=True, help_text="set when node_count was asked")
    amount = MoneyAmountField()
    currency = serializers.CharField()

    def to_representation(self, instance):
        # `allocation` is `allocations`' first: rendered once (half the booking answer's CPU).
        lead, members = instance["allocation"], instance["allocations"]
        if not members or members[0] is not lead:
            return super().to_representation(instance)
        data = super().to_representation({**instance, "allocation": None})
        data["allocation"] = data["allocations"][0]
        return data


class ClusterSerializer(serializers.Serializer):
    """Whole nodes of one network group booked together: one paid period, one charge."""

    id = serializers.UUIDField()
    team = serializers.IntegerField()
    gpu_model = serializers.SlugField()
    node_count = serializers.IntegerField()
    gpu_count = serializers.IntegerField()
    network_group = serializers.SlugField()
    fabric = serializers.CharField()
    region = serializers.SlugField()
    state = serializers.CharField(
        help_text="the nodes' state when they agree, else `mixed` (a node stopped on its own)"
    )
    paid_from = serializers.DateTimeField()
    paid_until = serializers.DateTimeField()
    quote = serializers.UUIDField()
    created_at = serializers.DateTimeField()
    allocations = AllocationSerializer(many=True)


class LedgerEntrySerializer(serializers.ModelSerializer):
    allocation = serializers.UUIDField(source="allocation_id")
    team = serializers.IntegerField(source="team_id")
    amount = MoneyAmountField(help_text="gross: net + vat")
    net = MoneyAmountField()
    vat = MoneyAmountField()
    description = serializers.SerializerMethodField(
        help_text="The row in words, in the language asked for (Accept-Language or ?lang=)"
    )

    class Meta:
        model = LedgerEntry
        fields = [
            "id", "team", "at", "kind", "reason", "period_count", "amount", "net", "vat",
            "currency", "description", "allocation",
        ]  # fmt: skip

    def get_description(self, entry) -> str:
        return ledger_entry_text(entry)


class StatementExportSerializer(serializers.ModelSerializer):
    """A statement export: `rows` and `size` (the CSV's bytes) once ready, `csv` its file
    until `expires_at`."""

    csv = serializers.SerializerMethodField()
    kind = serializers.SerializerMethodField()  # null: every kind

    class Meta:
        model = StatementExport
        fields = [
            "id", "state", "since", "until", "kind", "rows", "size", "created_at",
            "finished_at", "expires_at", "csv",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=LedgerKind.choices, allow_null=True))
    def get_kind(self, export: StatementExport) -> str | None:
        return export.kind or None

    def get_csv(self, export: StatementExport) -> str | None:
        if export.state != ExportState.READY:
            return None
        return reverse("api-ledger-export-csv", args=[export.pk])
