"""The catalog's reference lists: rental periods, options and regions."""

from django.db.models import Prefetch
from rest_framework import generics, permissions

from catalog.api.serializers import OptionSerializer, RegionSerializer, RentalPeriodSerializer
from catalog.models import GpuModel, Option, Region, RentalPeriod


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
