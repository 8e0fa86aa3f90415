"""Booking in the API: a quote becomes an allocation (a cluster's: one per node) and one
charge, once per Idempotency-Key (rentals.idempotency)."""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.problems import PROBLEM
from rentals import selectors, services
from rentals.access import access_of
from rentals.api.serializers import BookingInSerializer, BookingSerializer
from rentals.idempotency import idempotent

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
            402: PROBLEM,
            409: PROBLEM,
            422: PROBLEM,
            429: PROBLEM,
            503: PROBLEM,
        },
    )
    @idempotent(purchase=True)
    def post(self, request):
        data = BookingInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        acting = acting_for_request(request)
        allocation = services.allocation_book(
            acting=acting,
            quote=data.validated_data["quote"],
            ssh_keys=data.validated_data.get("ssh_keys"),
            payment=getattr(request, "purchase_payment", None),
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
