"""The team's ledger in the API: its entries with balances per currency, and as CSV."""

from django.utils import translation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.problems import PROBLEM
from core.renderers import CSVRenderer
from rentals import selectors
from rentals.api.serializers import (
    LedgerEntrySerializer,
    LedgerFilterSerializer,
    StatementExportSerializer,
)
from rentals.selectors import exports as export_reads
from rentals.services import exports as export_writes
from rentals.views.statement import (
    export_acting,
    statement_csv_response,
    statement_export_response,
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
        in_range = selectors.ledger_summary(acting=acting, filters=filters)
        every = selectors.ledger_summary(acting=acting) if any(filters.values()) else in_range
        response.data["balances"] = _money_list(every.balances)
        response.data["range_balances"] = _money_list(in_range.balances)
        response.data["balance"] = _optional(every.balance)
        response.data["range_net"] = _optional(in_range.balance)
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


class LedgerExportListApi(APIView):
    """Statement exports: a large statement's CSV written in the background, for the
    team's owners and billing members, kept for a few days (STATEMENT_EXPORT_DAYS)."""

    @extend_schema(responses={200: StatementExportSerializer(many=True), 403: PROBLEM})
    def get(self, request):
        exports = export_reads.statement_exports_recent(acting=acting_for_request(request))
        return Response(StatementExportSerializer(exports, many=True).data)

    @extend_schema(
        request=LedgerFilterSerializer,
        responses={202: StatementExportSerializer, 400: PROBLEM, 403: PROBLEM, 409: PROBLEM},
    )
    def post(self, request):
        """Queue an export of the statement as filtered (the same one while it is still
        being written); its `state` turns `ready` and the requester gets a notice."""
        filters = LedgerFilterSerializer(data=request.data)
        filters.is_valid(raise_exception=True)
        export = export_writes.statement_export_request(
            acting=acting_for_request(request), filters=filters.validated_data,
            language=translation.get_language() or "",
        )  # fmt: skip
        return Response(StatementExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)


class LedgerExportDetailApi(APIView):
    @extend_schema(responses={200: StatementExportSerializer, 403: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        export = export_reads.statement_export_get(acting=export_acting(request, pk), pk=pk)
        return Response(StatementExportSerializer(export).data)


class LedgerExportCsvApi(APIView):
    """An export's CSV: 409 while it is being written, 410 once expired."""

    renderer_classes = [CSVRenderer, JSONRenderer]

    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="the statement"),
            403: PROBLEM,
            404: PROBLEM,
            409: PROBLEM,
            410: PROBLEM,
        },
    )
    def get(self, request, pk):
        acting = export_acting(request, pk)
        export = export_reads.statement_export_for_download(acting=acting, pk=pk)
        return statement_export_response(export)
