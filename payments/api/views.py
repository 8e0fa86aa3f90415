"""Billing API: a team's billing, its cards, the processor's webhook, staff's statements."""

from django.http import Http404
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import acting_for_team
from core.problems import PROBLEM
from payments import selectors, services, statements, webhooks
from payments.api.serializers import (
    BillingSerializer,
    CardInSerializer,
    CardSerializer,
    SetupIntentSerializer,
    StatementInSerializer,
    StatementResultSerializer,
    TransferSerializer,
)
from payments.models import BankTransfer, TransferState


class TeamBillingApi(APIView):
    @extend_schema(responses={200: BillingSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        """The team's billing mode, cash balances per currency, credit limits, terms, cards
        and overdue invoices."""
        billing = selectors.team_billing(acting=acting_for_team(request, pk))
        return Response(BillingSerializer(billing).data)


class TeamCardListApi(APIView):
    @extend_schema(responses={200: CardSerializer(many=True), 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        billing = selectors.team_billing(acting=acting_for_team(request, pk))
        return Response(CardSerializer(billing["cards"], many=True).data)

    @extend_schema(
        request=CardInSerializer,
        responses={
            201: CardSerializer,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            404: PROBLEM,
            503: PROBLEM,
        },
    )
    def post(self, request, pk):
        """Save a card the processor holds (`pm_…` from Stripe.js's SetupIntent, or a test
        token): owners and billing members."""
        acting = acting_for_team(request, pk)
        data = CardInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        card = services.card_save(
            acting=acting,
            payment_method=data.validated_data["payment_method"],
            make_default=data.validated_data["default"],
        )
        return Response(CardSerializer(card).data, status=status.HTTP_201_CREATED)


class TeamCardDetailApi(APIView):
    @extend_schema(request=None, responses={204: None, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM})
    def delete(self, request, pk, card):
        services.card_remove(acting=acting_for_team(request, pk), pk=card)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamCardDefaultApi(APIView):
    @extend_schema(
        request=None, responses={200: CardSerializer, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM}
    )
    def post(self, request, pk, card):
        card = services.card_default_set(acting=acting_for_team(request, pk), pk=card)
        return Response(CardSerializer(card).data)


class TeamSetupIntentApi(APIView):
    @extend_schema(
        request=None,
        responses={201: SetupIntentSerializer, 401: PROBLEM, 403: PROBLEM, 503: PROBLEM},
    )
    def post(self, request, pk):
        """A SetupIntent for Stripe.js to collect a card with (card data goes to the
        processor, never to us)."""
        intent = services.card_setup_intent(acting=acting_for_team(request, pk))
        return Response(SetupIntentSerializer(intent).data, status=status.HTTP_201_CREATED)


class StatementUploadApi(APIView):
    permission_classes = [permissions.IsAdminUser]
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={"multipart/form-data": StatementInSerializer},
        responses={200: StatementResultSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM},
    )
    def post(self, request):
        """Import a camt.053 or MT940 statement: each credit matched to a team's invoices
        (by number, then by amount) or queued for staff. Importing it again changes
        nothing."""
        data = StatementInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = data.validated_data["file"]
        result = statements.statement_import(
            content=upload.read(statements.MAX_BYTES + 1), filename=upload.name, user=request.user
        )
        return Response(StatementResultSerializer(result).data)


class UnmatchedListApi(APIView):
    permission_classes = [permissions.IsAdminUser]

    @extend_schema(responses={200: TransferSerializer(many=True), 401: PROBLEM, 403: PROBLEM})
    def get(self, request):
        """Credits no team's invoice matched: staff assign them."""
        rows = BankTransfer.objects.filter(state=TransferState.UNMATCHED).order_by(
            "booked_on", "id"
        )[:500]
        return Response(TransferSerializer(rows, many=True).data)


@csrf_exempt
def stripe_webhook(request):
    """POST /webhooks/stripe/: the processor's events, verified by signature, applied once."""
    if request.method != "POST":
        raise Http404
    return webhooks.webhook_response(request)
