"""The remedies for an impaired allocation in the API (staff with the operator permissions):
replace its GPUs, or read and issue a credit note for its impaired time."""

from decimal import Decimal

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.money import quantize
from core.problems import PROBLEM
from rentals import selectors
from rentals.api.serializers import AllocationSerializer
from rentals.services.credits import credit_note_issue, credit_note_preview
from rentals.services.impairments import allocation_replace


class CreditNoteInSerializer(serializers.Serializer):
    preview = serializers.BooleanField(
        default=True, help_text="true: read the note, nothing is written; false: issue it"
    )
    span = serializers.IntegerField(
        required=False, allow_null=True, default=None,
        help_text="one impaired span (its id); every span not yet credited when absent",
    )  # fmt: skip


class CreditLineSerializer(serializers.Serializer):
    span = serializers.IntegerField(source="span.pk")
    started_at = serializers.DateTimeField(source="span.started_at")
    ended_at = serializers.DateTimeField(source="span.ended_at")
    gpus = serializers.IntegerField(help_text="impaired GPUs")
    gpu_hours = serializers.DecimalField(max_digits=18, decimal_places=4)
    hourly_rate = serializers.SerializerMethodField(help_text="per GPU: unit price ÷ period hours")
    amount = serializers.SerializerMethodField()

    def get_hourly_rate(self, line) -> str:
        return str(line.hourly_rate.quantize(Decimal("0.000001")))

    def get_amount(self, line) -> str:
        return str(quantize(line.amount, self.context["currency"]))


class CreditNoteSerializer(serializers.Serializer):
    allocation = serializers.UUIDField(source="allocation.pk")
    lines = serializers.SerializerMethodField()
    net = serializers.SerializerMethodField(help_text="the lines' sum")
    vat = serializers.SerializerMethodField(help_text="the VAT the charge carried, on the net")
    total = serializers.SerializerMethodField(help_text="what is credited: net + vat")
    currency = serializers.CharField()
    issued = serializers.BooleanField()

    def get_net(self, note) -> str:
        return str(quantize(note.net, note.currency))

    def get_vat(self, note) -> str:
        return str(quantize(note.vat, note.currency))

    def get_lines(self, note) -> list[dict]:
        lines = CreditLineSerializer(note.lines, many=True, context={"currency": note.currency})
        # many=True makes a ListSerializer, whose data is a list; the stubs see a Serializer.
        return lines.data  # type: ignore[return-value]

    def get_total(self, note) -> str:
        return str(quantize(note.total, note.currency))


def _readable(request, pk):
    allocation = selectors.allocation_get(acting=acting_for_request(request), pk=pk)
    if allocation is None:
        raise Http404
    return allocation


class AllocationReplaceApi(APIView):
    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        request=None,
        responses={200: AllocationSerializer, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM,
                   409: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        """Swap the impaired GPUs for equivalent free ones for the rest of the paid period
        (the same id, paid period and price). 409 when nothing is impaired or no spare
        exists (`no_spare`)."""
        _readable(request, pk)
        allocation_replace(operator=request.user, allocation_id=pk)
        return Response(AllocationSerializer(_readable(request, pk)).data)


class AllocationCreditNoteApi(APIView):
    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        request=CreditNoteInSerializer,
        examples=[
            OpenApiExample("Read it first", request_only=True, value={"preview": True}),
            OpenApiExample("Issue it", request_only=True, value={"preview": False}),
        ],
        responses={200: CreditNoteSerializer, 201: CreditNoteSerializer, 400: PROBLEM,
                   401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        """The credit note for impaired time not yet credited: `{lines, total, currency}`
        (200 as a preview, 201 when issued: a ledger row of kind `credit` per span)."""
        _readable(request, pk)
        data = CreditNoteInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        span = data.validated_data["span"]
        if data.validated_data["preview"]:
            note = credit_note_preview(operator=request.user, allocation_id=pk, span_id=span)
            return Response(CreditNoteSerializer(note).data)
        note = credit_note_issue(operator=request.user, allocation_id=pk, span_id=span)
        return Response(CreditNoteSerializer(note).data, status=status.HTTP_201_CREATED)
