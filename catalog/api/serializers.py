from rest_framework import serializers

from catalog.models import GpuModel, Option, Region, RentalPeriod
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
    gpu_models: "serializers.RelatedField[GpuModel, str, str] | serializers.ManyRelatedField" = (
        serializers.SlugRelatedField(slug_field="slug", many=True, read_only=True)
    )
    input_label = in_language("What a quote must give with it (`input`); empty: nothing")
    lead_time_seconds = serializers.SerializerMethodField(
        help_text="how long before the start it must be booked; 0: it can start now"
    )

    def get_lead_time_seconds(self, option) -> int:
        return int(option.lead_time.total_seconds())

    class Meta:
        model = Option
        fields = [
            "slug", "name", "description", "unit", "billing", "max_quantity", "gpu_models",
            "input_label", "lead_time_seconds",
        ]  # fmt: skip


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
