"""The catalog's reference lists: rental periods, options and regions."""

from django.db.models import Prefetch
from django.shortcuts import get_object_or_404
from rest_framework import generics, permissions

from catalog.api.serializers import (
    OptionSerializer,
    PriceHistorySerializer,
    RegionSerializer,
    RentalPeriodSerializer,
)
from catalog.models import GpuModel, Option, Region, RentalPeriod
from catalog.selectors import gpu_price_history


class RentalPeriodListApi(generics.ListAPIView):
    permission_classes = [permissions.AllowAny]
    serializer_class = RentalPeriodSerializer
    pagination_class = None
    queryset = RentalPeriod.objects.filter(is_active=True)


class OptionListApi(generics.ListAPIView):
    permission_classes = [permissions.AllowAny]
    serializer_class = OptionSerializer
    pagination_class = None
    queryset = Option.objects.filter(is_active=True).prefetch_related(
        Prefetch("gpu_models", queryset=GpuModel.objects.only("slug"))
    )


class RegionListApi(generics.ListAPIView):
    permission_classes = [permissions.AllowAny]
    serializer_class = RegionSerializer
    pagination_class = None
    queryset = Region.objects.all()


class GpuModelPriceHistoryApi(generics.ListAPIView):
    """Every price of a GPU model, newest first per period: past, current and upcoming."""

    permission_classes = [permissions.AllowAny]
    serializer_class = PriceHistorySerializer
    pagination_class = None

    def get_queryset(self):
        gpu_model = get_object_or_404(GpuModel, slug=self.kwargs["slug"], is_active=True)
        return gpu_price_history(gpu_model=gpu_model)
