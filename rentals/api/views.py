"""The rentals API: the offer, quotes, bookings, allocations and their actions, the ledger.

Thin: validate, call one service, serialize. Purchases go through rentals.idempotency.
"""

from django.http import Http404, HttpResponse, HttpResponseNotModified
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, permissions, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.access import acting_for_request
from core.problems import PROBLEM
from core.renderers import CSVRenderer
from rentals import selectors, services, usage
from rentals.access import access_of
from rentals.api.serializers import (
    AllocationFilterSerializer,
    AllocationKeysInSerializer,
    AllocationSerializer,
    BookingInSerializer,
    BookingSerializer,
    ExtendInSerializer,
    ExtensionQuoteInSerializer,
    GpuModelFilterSerializer,
    GpuModelSerializer,
    LedgerEntrySerializer,
    LedgerFilterSerializer,
    QuoteInSerializer,
    QuoteSerializer,
    TelemetryQuerySerializer,
)
from rentals.availability import gpu_model_offers
from rentals.catalog_cache import catalog_answer
from rentals.errors import QuoteMissing
from rentals.idempotency import idempotent
from rentals.views.statement import statement_csv_response

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    type=str,
    location=OpenApiParameter.HEADER,
    required=True,
    description=(
        "A UUID per purchase. Keys belong to the team: any member retrying with the same key "
        "and body replays the first response "
        "(header `Idempotent-Replayed: true`) and charges nothing again; the same key with a "
        "different body is 422; while the first request runs, 409. Keys are kept 24 hours, "
        "then purged: a key reused after that is a new request."
    ),
)


class GpuModelListApi(generics.ListAPIView):
    """GPU models with specs, the price in force per period, and GPUs free now."""

    permission_classes = [permissions.AllowAny]
    serializer_class = GpuModelSerializer

    def get_queryset(self):
        filters = GpuModelFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return gpu_model_offers(filters=filters.validated_data)

    @extend_schema(
        parameters=[GpuModelFilterSerializer],
        responses={200: GpuModelSerializer(many=True), 304: None, 400: PROBLEM},
    )
    def get(self, request, *args, **kwargs):
        """Answered from the catalog read model (rentals.catalog_cache); `ETag` on every
        answer, `304 Not Modified` to a client that sends it back in `If-None-Match`."""
        body, etag = catalog_answer(
            request.build_absolute_uri(), lambda: super(GpuModelListApi, self).get(
                request, *args, **kwargs
            ).data,
        )  # fmt: skip
        if etag in request.headers.get("If-None-Match", ""):
            response = HttpResponseNotModified()
        else:  # the stored bytes: JSON is this API's only representation
            response = HttpResponse(body, content_type="application/json")
        response["ETag"] = etag
        response["Cache-Control"] = "no-cache"  # keep it, but ask again each time
        return response


class QuoteCreateApi(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "quote"

    @extend_schema(
        request=QuoteInSerializer,
        examples=[
            OpenApiExample(
                "Two H100s for a week, starting now, with 2 TB of scratch",
                request_only=True,
                value={
                    "gpu_model": "h100-sxm",
                    "gpu_count": 2,
                    "period": "week",
                    "period_count": 1,
                    "options": [{"option": "nvme-scratch", "quantity": 2}],
                },
            ),
            OpenApiExample(
                "A cluster: two whole H100 nodes on one InfiniBand fabric for a week",
                request_only=True,
                value={
                    "gpu_model": "h100-sxm",
                    "node_count": 2,
                    "period": "week",
                    "period_count": 1,
                },
            ),  # fmt: skip
            OpenApiExample(
                "Eight H200s for 3 days from a chosen start",
                request_only=True,
                value={
                    "gpu_model": "h200",
                    "gpu_count": 8,
                    "period": "day",
                    "period_count": 3,
                    "starts_at": "2026-12-07T09:00:00Z",
                },
            ),
        ],  # fmt: skip
        responses={201: QuoteSerializer, 400: PROBLEM, 401: PROBLEM, 409: PROBLEM, 429: PROBLEM},
    )
    def post(self, request):
        data = QuoteInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        quote = services.quote_create(acting=acting_for_request(request), **data.validated_data)
        # answered from the objects just stored (their lines included), not read back
        return Response(QuoteSerializer(quote).data, status=status.HTTP_201_CREATED)


class QuoteDetailApi(APIView):
    @extend_schema(responses={200: QuoteSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        quote = selectors.quote_get(acting=acting_for_request(request), pk=pk)
        if quote is None:
            raise Http404
        return Response(QuoteSerializer(quote).data)


class BookingCreateApi(APIView):
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "purchase"

    @extend_schema(
        request=BookingInSerializer,
        examples=[
            OpenApiExample(
                "Book a quote (send an Idempotency-Key header: a UUID, reused on retries)",
                request_only=True,
                value={"quote": "3f0c7a52-5b1e-4f0e-9d1a-2b8e6f0c9a11"},
            )
        ],
        parameters=[IDEMPOTENCY_HEADER],
        responses={
            201: BookingSerializer,
            400: PROBLEM,
            401: PROBLEM,
            409: PROBLEM,
            422: PROBLEM,
            429: PROBLEM,
        },
    )
    @idempotent
    def post(self, request):
        data = BookingInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        acting = acting_for_request(request)
        allocation = services.allocation_book(
            acting=acting,
            quote=data.validated_data["quote"],
            ssh_keys=data.validated_data.get("ssh_keys"),
        )
        quote = allocation.quote
        if allocation.cluster_id:
            members = selectors.cluster_get(acting=acting, pk=allocation.cluster_id)[1]
            members.sort(key=lambda member: member.pk != allocation.pk)
        else:
            members = [allocation]  # it carries what was written: no need to read it back
        body = {
            "id": allocation.pk,
            "allocation": members[0],
            "allocations": members,
            "cluster": allocation.cluster_id,
            "amount": quote.total,
            "currency": quote.currency,
        }
        answer = BookingSerializer(body, context={"access": access_of(members)})
        return Response(answer.data, status=status.HTTP_201_CREATED)


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
    allocation, may_act = selectors.allocation_for_action(acting=acting_for_request(request), pk=pk)
    if allocation is None:
        raise Http404
    if not may_act:
        raise PermissionDenied(_("Staff can read every allocation but change none."))
    return allocation


def _fresh(request, allocation):
    return AllocationSerializer(
        selectors.allocation_get(acting=acting_for_request(request), pk=allocation.pk)
    ).data


class _AllocationActionApi(APIView):
    service = None

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
    service = services.allocation_stop


class AllocationStartApi(_AllocationActionApi):
    service = services.allocation_start


class AllocationCancelApi(_AllocationActionApi):
    service = services.allocation_cancel


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
    @idempotent
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
    """Series per GPU: raw samples up to 6 h, per-minute rollups up to 7 days, then hourly."""

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
            usage.allocation_series(
                allocation=allocation,
                start=query.validated_data.get("start"),
                end=query.validated_data.get("end"),
            )
        )


class LedgerListApi(generics.ListAPIView):
    serializer_class = LedgerEntrySerializer

    def _filters(self):
        filters = LedgerFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return filters.validated_data

    def get_queryset(self):
        return selectors.ledger_entries(
            acting=acting_for_request(self.request), filters=self._filters()
        )

    @extend_schema(parameters=[LedgerFilterSerializer])
    def list(self, request, *args, **kwargs):
        response = super().list(request, *args, **kwargs)
        # `balances` are all time, one per currency; `range_balances` the net of the entries
        # the filters select. `balance` and `range_net` stay for one-currency ledgers (null
        # when there are several: amounts of different currencies are never added).
        acting = acting_for_request(request)
        filters = self._filters()
        response.data["balances"] = _money_list(selectors.ledger_balances(acting=acting))
        response.data["range_balances"] = _money_list(
            selectors.ledger_balances(acting=acting, filters=filters)
        )
        response.data["balance"] = _optional(selectors.ledger_balance(acting=acting))
        response.data["range_net"] = _optional(
            selectors.ledger_balance(acting=acting, filters=filters)
        )
        return response


def _money_list(balances):
    return [{"currency": m.currency, "amount": str(m.amount)} for m in balances]  # Money: exact


def _optional(amount):
    return None if amount is None else str(amount)


class LedgerCsvApi(APIView):
    """The statement as CSV (one row per charge or refund; refunds negative)."""

    renderer_classes = [CSVRenderer, JSONRenderer]

    @extend_schema(
        parameters=[LedgerFilterSerializer],
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the statement"),
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
        },
    )
    def get(self, request):
        filters = LedgerFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        return statement_csv_response(
            acting=acting_for_request(request), filters=filters.validated_data
        )
