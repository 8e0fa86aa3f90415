from rest_framework import serializers

from catalog.models import Option, Region, RentalPeriod
from core.fields import MoneyAmountField


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


class PriceHistorySerializer(serializers.Serializer):
    period = serializers.CharField(source="period.slug")
    unit_price = MoneyAmountField()
    currency = serializers.CharField()
    effective_from = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=["past", "current", "upcoming"])
