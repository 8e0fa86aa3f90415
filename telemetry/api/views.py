"""Fleet health for staff."""

from django.db.models import Count
from rest_framework import generics, permissions

from catalog.models import Node
from telemetry.api.serializers import NodeSerializer


class NodeListApi(generics.ListAPIView):
    """Fleet health, for staff."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = NodeSerializer
    queryset = (
        Node.objects.select_related("region", "gpu_model")
        .annotate(gpu_total=Count("gpus"))
        .order_by("hostname")
    )
