"""Allocations in the API: list and read them, act on them (stop, start, cancel, SSH keys,
extend, extension quotes) and read what their GPUs did (telemetry series, usage)."""

from typing import ClassVar, Protocol

from django.http import Http404
from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.roles import Acting, acting_for_request
from core.problems import PROBLEM
from rentals import selectors, services
from rentals.api.bookings import IDEMPOTENCY_HEADER
from rentals.api.serializers import (
    AllocationFilterSerializer,
    AllocationKeysInSerializer,
    AllocationSerializer,
    ExtendInSerializer,
    ExtensionQuoteInSerializer,
    QuoteSerializer,
    TelemetryQuerySerializer,
)
from rentals.errors import QuoteMissing
from rentals.idempotency import idempotent
from rentals.models import Allocation
from rentals.selectors.allocation_usage import allocation_series, allocation_usage


class AllocationListApi(generics.ListAPIView):
    serializer_class = AllocationSerializer

    def get_queryset(self):
        filters = AllocationFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return selectors.allocation_list(
            acting=acting_for_request(self.request),
            state=filters.validated_data.get("state"),
            filters=filters.validated_data,
        )

    @extend_schema(
        parameters=[AllocationFilterSerializer],
        responses={200: AllocationSerializer(many=True), 400: PROBLEM, 401: PROBLEM},
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class AllocationDetailApi(APIView):
    @extend_schema(responses={200: AllocationSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        allocation = selectors.allocation_get(acting=acting_for_request(request), pk=pk)
        if allocation is None:
            raise Http404
        return Response(AllocationSerializer(allocation).data)


def _own_allocation(request, pk):
    allocation = selectors.allocation_for_action(acting=acting_for_request(request), pk=pk)
    if allocation is None:
        raise Http404
    return allocation


def _fresh(request, allocation):
    return AllocationSerializer(
        selectors.allocation_get(acting=acting_for_request(request), pk=allocation.pk)
    ).data


class _AllocationAction(Protocol):
    """rentals.services.allocation_<action>."""

    def __call__(self, *, acting: Acting, allocation: Allocation) -> object: ...


class _AllocationActionApi(APIView):
    service: ClassVar[_AllocationAction]  # each action's own, as a staticmethod

    @extend_schema(
        request=None,
        responses={
            200: AllocationSerializer,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
            409: PROBLEM,
        },
    )
    def post(self, request, pk):
        allocation = _own_allocation(request, pk)
        type(self).service(acting=acting_for_request(request), allocation=allocation)
        return Response(_fresh(request, allocation))


class AllocationStopApi(_AllocationActionApi):
    service = staticmethod(services.allocation_stop)


class AllocationStartApi(_AllocationActionApi):
    service = staticmethod(services.allocation_start)


class AllocationCancelApi(_AllocationActionApi):
    service = staticmethod(services.allocation_cancel)


class AllocationKeysApi(APIView):
    @extend_schema(
        request=AllocationKeysInSerializer,
        responses={200: AllocationSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        """Choose the SSH keys a live allocation lets in (a cluster's: every node's). The
        node's agent adds or removes them at its next look; `access.state` says when."""
        allocation = _own_allocation(request, pk)
        data = AllocationKeysInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.allocation_keys_set(
            acting=acting_for_request(request),
            allocation=allocation,
            ssh_key_ids=data.validated_data["ssh_keys"],
        )
        return Response(_fresh(request, allocation))


class AllocationExtendApi(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "purchase"

    @extend_schema(
        request=ExtendInSerializer,
        examples=[
            OpenApiExample(
                "Charge an extension quote exactly",
                request_only=True,
                value={"quote": "9a4d1c3e-7f2b-4c8e-a1d0-5e6f7a8b9c0d"},
            ),
            OpenApiExample(
                "Price and charge one more period now", request_only=True, value={"period_count": 1}
            ),
        ],
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            200: AllocationSerializer,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
            409: PROBLEM,
            422: PROBLEM,
            429: PROBLEM,
        },
    )
    @idempotent(purchase=True)
    def post(self, request, pk):
        allocation = _own_allocation(request, pk)
        extend_from_request(request, allocation)
        return Response(_fresh(request, allocation))


def extend_from_request(request, allocation):
    """Extend by the request's extension quote or period count (a cluster's allocation: the
    whole cluster)."""
    data = ExtendInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    acting = acting_for_request(request)
    quote = None
    if "quote" in data.validated_data:
        quote = selectors.quote_get(acting=acting, pk=data.validated_data["quote"])
        if quote is None:
            raise QuoteMissing(_("No such quote."), field="quote")
    return services.allocation_extend(
        acting=acting,
        allocation=allocation,
        quote=quote,
        period_count=data.validated_data.get("period_count"),
        payment=getattr(request, "purchase_payment", None),
    )


class AllocationExtensionQuoteApi(APIView):
    """The price of extending by whole periods, as a quote to read before `extend/`."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "quote"

    @extend_schema(
        request=ExtensionQuoteInSerializer,
        responses={201: QuoteSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM,
                   409: PROBLEM, 429: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        return extension_quote_response(request, _own_allocation(request, pk))


def extension_quote_response(request, allocation):
    """The extension quote for the request's period count (a cluster's allocation: for the
    whole cluster), answered as 201."""
    data = ExtensionQuoteInSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    acting = acting_for_request(request)
    quote = services.extension_quote_create(
        acting=acting, allocation=allocation, period_count=data.validated_data["period_count"]
    )
    quote = selectors.quote_get(acting=acting, pk=quote.pk)
    return Response(QuoteSerializer(quote).data, status=status.HTTP_201_CREATED)


class AllocationTelemetryApi(APIView):
    """Series per GPU: raw samples up to 6 h; minute points (from raw samples, while they are
    kept) up to 7 days; otherwise hourly points, `source` "hour". With
    TELEMETRY_SOURCE=prometheus the minutes from the engine (`source`: engine), or the stored
    points and `engine_fallback` saying why not."""

    @extend_schema(
        parameters=[
            OpenApiParameter("from", OpenApiTypes.DATETIME, description="default: an hour ago"),
            OpenApiParameter("to", OpenApiTypes.DATETIME, description="default: now"),
        ],
        responses={200: OpenApiTypes.OBJECT, 400: PROBLEM, 401: PROBLEM, 404: PROBLEM},
    )
    def get(self, request, pk):
        allocation = selectors.allocation_get(acting=acting_for_request(request), pk=pk)
        if allocation is None:
            raise Http404
        params = {"start": request.query_params.get("from"), "end": request.query_params.get("to")}
        query = TelemetryQuerySerializer(data={k: v for k, v in params.items() if v})
        query.is_valid(raise_exception=True)
        return Response(
            allocation_series(
                allocation=allocation,
                start=query.validated_data.get("start"),
                end=query.validated_data.get("end"),
            )
        )


class AllocationUsageSerializer(serializers.Serializer):
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    paid_hours = serializers.FloatField()
    hours_left = serializers.FloatField()
    running_hours = serializers.FloatField()
    stopped_hours = serializers.FloatField()
    gpu_hours = serializers.FloatField()
    covered_gpu_hours = serializers.FloatField(help_text="GPU-hours telemetry saw")
    edges_unsplit = serializers.BooleanField(
        help_text="a partial hour at a holding's start or end could not be split (its raw"
        " samples pruned, no edge kept): the figures leave it out"
    )
    # A declared field: DRF's metaclass takes it off the class, `Serializer.partial` stays.
    partial = serializers.BooleanField(  # type: ignore[assignment]
        help_text="telemetry saw under 95 % of the window"
    )
    busy_hours = serializers.FloatField(help_text="busy GPU-hours")
    util_avg = serializers.FloatField(allow_null=True)
    util_max = serializers.FloatField(allow_null=True)
    mem_max_mib = serializers.FloatField(allow_null=True)
    energy_kwh = serializers.FloatField(allow_null=True)
    idle_hours = serializers.FloatField(allow_null=True)

    def get_fields(self):
        # "from" is a Python keyword: declared as start/end, named from/to in the API and
        # its schema alike.
        fields = super().get_fields()
        renamed = {"start": "from", "end": "to"}
        return {renamed.get(name, name): field for name, field in fields.items()}


class AllocationUsageApi(APIView):
    """The whole paid window so far: rollups where raw samples are gone, raw samples for
    the newest part."""

    @extend_schema(responses={200: AllocationUsageSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        allocation = selectors.allocation_get(acting=acting_for_request(request), pk=pk)
        if allocation is None:
            raise Http404
        summary = allocation_usage(allocation=allocation, now=timezone.now())
        return Response(AllocationUsageSerializer(summary).data)
