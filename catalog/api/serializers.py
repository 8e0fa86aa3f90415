from rest_framework import serializers

from catalog.models import Option, Region, RentalPeriod
from core.fields import MoneyAmountField


def in_language(help_text: str) -> serializers.CharField:
    """A catalog word in the request's language (Accept-Language; English where the
    catalog has no translation)."""
    return serializers.CharField(read_only=True, help_text=help_text)


class RentalPeriodSerializer(serializers.ModelSerializer):
    name = in_language("The period's name")
    duration_seconds = serializers.SerializerMethodField()

    class Meta:
        model = RentalPeriod
        fields = ["slug", "name", "duration_seconds"]

    def get_duration_seconds(self, obj) -> int:
        return int(obj.duration.total_seconds())


class OptionSerializer(serializers.ModelSerializer):
    name = in_language("The option's name")
    description = in_language("What the option gives")
    unit = in_language("What one of its quantity is: TB, address, setup")
    gpu_models = serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)

    class Meta:
        model = Option
        fields = ["slug", "name", "description", "unit", "billing", "max_quantity", "gpu_models"]


class RegionSerializer(serializers.ModelSerializer):
    name = in_language("The region's name")

    class Meta:
        model = Region
        fields = ["slug", "name"]


class PriceHistorySerializer(serializers.Serializer):
    period = serializers.CharField(source="period.slug")
    unit_price = MoneyAmountField()
    currency = serializers.CharField()
    effective_from = serializers.DateTimeField()
    status = serializers.ChoiceField(choices=["past", "current", "upcoming"])
