from rest_framework import serializers

from rentals.models import Allocation, AllocationEvent, LedgerEntry, Quote, QuoteLine


class QuoteOptionInSerializer(serializers.Serializer):
    option = serializers.SlugField()
    quantity = serializers.IntegerField(min_value=1, max_value=10_000, default=1)


class QuoteInSerializer(serializers.Serializer):
    gpu_model = serializers.SlugField()
    gpu_count = serializers.IntegerField(min_value=1, max_value=1024)
    period = serializers.SlugField()
    period_count = serializers.IntegerField(min_value=1, max_value=10_000)
    starts_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    options = QuoteOptionInSerializer(many=True, required=False, default=list)


class QuoteLineSerializer(serializers.ModelSerializer):
    option = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = QuoteLine
        fields = ["kind", "option", "description", "quantity", "unit_price", "amount"]


class QuoteSerializer(serializers.ModelSerializer):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    period = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    lines = QuoteLineSerializer(many=True, read_only=True)

    class Meta:
        model = Quote
        fields = [
            "id",
            "gpu_model",
            "gpu_count",
            "period",
            "period_count",
            "lines",
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


class ExtendInSerializer(serializers.Serializer):
    period_count = serializers.IntegerField(min_value=1, max_value=10_000)


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


class AllocationSerializer(serializers.ModelSerializer):
    gpu_model = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    period = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    node = serializers.CharField(source="node.hostname", read_only=True)
    region = serializers.CharField(source="node.region.slug", read_only=True)
    owner = serializers.CharField(source="user.username", read_only=True)
    gpus = GpuRefSerializer(source="held", many=True, read_only=True)
    events = EventSerializer(many=True, read_only=True)

    class Meta:
        model = Allocation
        fields = [
            "id",
            "state",
            "owner",
            "gpu_model",
            "gpu_count",
            "period",
            "node",
            "region",
            "gpus",
            "paid_from",
            "paid_until",
            "quote",
            "created_at",
            "events",
        ]
        read_only_fields = fields


class BookingSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    allocation = AllocationSerializer()
    amount = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()


class LedgerEntrySerializer(serializers.ModelSerializer):
    allocation = serializers.UUIDField(source="allocation_id")

    class Meta:
        model = LedgerEntry
        fields = ["id", "at", "kind", "amount", "currency", "description", "allocation"]
