"""Quotes in the API: price a request (a snapshot valid for a limited time) and read it."""

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.problems import PROBLEM
from rentals import selectors, services
from rentals.api.serializers import QuoteInSerializer, QuoteSerializer


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
                "One H100 for a day in Frankfurt only (`region`; omit it for any region)",
                request_only=True,
                value={
                    "gpu_model": "h100-sxm",
                    "gpu_count": 1,
                    "period": "day",
                    "period_count": 1,
                    "region": "de-fra",
                },
            ),
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
