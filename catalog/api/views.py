from django.db.models import Count, Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions

from catalog.api.serializers import (
    GpuModelFilterSerializer,
    GpuModelSerializer,
    NodeSerializer,
    OptionSerializer,
    RegionSerializer,
    RentalPeriodSerializer,
)
from catalog.models import GpuModel, Node, Option, Region, RentalPeriod
from catalog.selectors import gpu_model_list

PROBLEM = OpenApiResponse(description="Problem details (RFC 9457)")


class GpuModelListApi(generics.ListAPIView):
    """GPU models with specs, the price in force per period, and GPUs free now."""

    permission_classes = [permissions.AllowAny]
    serializer_class = GpuModelSerializer

    def get_queryset(self):
        filters = GpuModelFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return gpu_model_list(filters=filters.validated_data)

    @extend_schema(
        parameters=[GpuModelFilterSerializer],
        responses={200: GpuModelSerializer(many=True), 400: PROBLEM},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


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


class NodeListApi(generics.ListAPIView):
    """Fleet health, for staff."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = NodeSerializer
    queryset = (
        Node.objects.select_related("region", "gpu_model")
        .annotate(gpu_total=Count("gpus"))
        .order_by("hostname")
    )
