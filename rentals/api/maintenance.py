"""Maintenance windows in the API (staff): schedule one over nodes or GPUs, choosing what
happens to the bookings in its way, and list them."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response

from core.fields import BoundedDateTimeField
from core.problems import PROBLEM
from rentals import selectors
from rentals.services.maintenance import MAX_TARGETS, Choice, maintenance_create


class AffectedChoiceSerializer(serializers.Serializer):
    allocation = serializers.UUIDField()
    action = serializers.ChoiceField(
        choices=Choice.choices,
        help_text="move: equivalent GPUs for the same paid period and price; cancel: a full "
        "refund, for a booking that has not started",
    )


class MaintenanceInSerializer(serializers.Serializer):
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=255), required=False, default=list,
        max_length=MAX_TARGETS, help_text="hostnames: every GPU of each",
    )  # fmt: skip
    gpus = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, default=list,
        max_length=MAX_TARGETS, help_text="single GPUs, by UUID",
    )  # fmt: skip
    starts_at = BoundedDateTimeField()
    ends_at = BoundedDateTimeField()
    reason = serializers.CharField(max_length=300, help_text="shown to the customers it moves")
    # many=True hands max_length to the ListSerializer; the stubs' __init__ omits it.
    affected = AffectedChoiceSerializer(  # type: ignore[call-arg]
        many=True, required=False, default=list, max_length=1000,
        help_text="a choice for each booking in the window's way (a 409 lists them)",
    )  # fmt: skip


class WindowGpuSerializer(serializers.Serializer):
    node = serializers.CharField(source="gpu.node.hostname")
    index = serializers.IntegerField(source="gpu.index")
    uuid = serializers.CharField(source="gpu.uuid")


class OutcomeSerializer(serializers.Serializer):
    allocation = serializers.UUIDField(source="allocation.pk")
    action = serializers.CharField()
    node = serializers.CharField(source="allocation.node.hostname", help_text="where it is now")


class MaintenanceWindowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField()
    reason = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()
    nodes = serializers.SerializerMethodField()
    gpus = WindowGpuSerializer(source="held", many=True)
    affected = OutcomeSerializer(
        source="outcome", many=True, required=False,
        help_text="what was done to the bookings in its way (when it was created)",
    )  # fmt: skip

    def get_nodes(self, window) -> list[str]:
        return sorted({h.gpu.node.hostname for h in window.held.all()})


class MaintenanceListApi(generics.ListAPIView):
    """Windows, the latest first (staff)."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = MaintenanceWindowSerializer

    def get_queryset(self):
        return selectors.maintenance_list()

    @extend_schema(responses={200: MaintenanceWindowSerializer(many=True), 401: PROBLEM,
                              403: PROBLEM})  # fmt: skip
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=MaintenanceInSerializer,
        examples=[
            OpenApiExample(
                "A node for four hours, moving the booking in its way",
                request_only=True,
                value={
                    "nodes": ["gpu-node-07"], "starts_at": "2026-12-08T06:00:00Z",
                    "ends_at": "2026-12-08T10:00:00Z", "reason": "PSU replacement",
                    "affected": [{"allocation": "9a4d1c3e-7f2b-4c8e-a1d0-5e6f7a8b9c0d",
                                  "action": "move"}],
                },  # fmt: skip
            )
        ],
        responses={201: MaintenanceWindowSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   409: PROBLEM},
    )  # fmt: skip
    def post(self, request):
        """Hold nodes or GPUs for [starts_at, ends_at). With bookings in the way and no
        choice for each, 409 lists them (`affected`, with the choices each allows)."""
        data = MaintenanceInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        window = maintenance_create(operator=request.user, **data.validated_data)
        created = selectors.maintenance_get(pk=window.pk)
        created.outcome = window.outcome
        return Response(MaintenanceWindowSerializer(created).data, status=status.HTTP_201_CREATED)
