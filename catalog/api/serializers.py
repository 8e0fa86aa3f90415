from rest_framework import serializers

from catalog.models import GpuModel, Node, Option, Region, RentalPeriod


class PriceSerializer(serializers.Serializer):
    period = serializers.CharField(source="period.slug")
    unit_price = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()
    effective_from = serializers.DateTimeField()


class GpuModelSerializer(serializers.ModelSerializer):
    prices = PriceSerializer(source="current_prices", many=True)
    free_gpus_now = serializers.IntegerField()

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
            "prices",
            "free_gpus_now",
        ]


class GpuModelFilterSerializer(serializers.Serializer):
    vendor = serializers.ChoiceField(choices=["nvidia", "amd"], required=False)
    min_memory_gb = serializers.IntegerField(min_value=0, max_value=100_000, required=False)
    stack = serializers.ChoiceField(choices=["cuda", "rocm"], required=False)
    fp8 = serializers.BooleanField(required=False, allow_null=True, default=None)
    max_price = serializers.DecimalField(
        max_digits=14, decimal_places=2, min_value=0, required=False
    )
    price_period = serializers.SlugField(required=False)
    ordering = serializers.ChoiceField(
        choices=["name", "-name", "memory_gb", "-memory_gb", "bandwidth_gbps", "-bandwidth_gbps"],
        required=False,
    )


class RentalPeriodSerializer(serializers.ModelSerializer):
    duration_seconds = serializers.SerializerMethodField()

    class Meta:
        model = RentalPeriod
        fields = ["slug", "name", "duration_seconds"]

    def get_duration_seconds(self, obj) -> int:
        return int(obj.duration.total_seconds())


class OptionSerializer(serializers.ModelSerializer):
    gpu_models = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)

    class Meta:
        model = Option
        fields = ["slug", "name", "description", "unit", "billing", "max_quantity", "gpu_models"]


class RegionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Region
        fields = ["slug", "name"]


class NodeSerializer(serializers.ModelSerializer):
    region = serializers.CharField(source="region.slug")
    gpu_model = serializers.CharField(source="gpu_model.slug")
    gpu_total = serializers.IntegerField()

    class Meta:
        model = Node
        fields = [
            "hostname",
            "region",
            "gpu_model",
            "exporter",
            "state",
            "health",
            "health_detail",
            "last_poll_at",
            "last_good_poll_at",
            "gpu_total",
        ]
