"""Webhook endpoints in the API: register (the secret is answered once), change, test,
remove, and read each endpoint's delivery log."""

from django.http import Http404
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import acting_for_request
from core.problems import PROBLEM
from webhooks import selectors, services
from webhooks.api.serializers import (
    DeliverySerializer,
    EndpointChangeSerializer,
    EndpointCreatedSerializer,
    EndpointInSerializer,
    EndpointSerializer,
)


def _endpoint(request, pk):
    endpoint = selectors.endpoint_get(acting=acting_for_request(request), pk=pk)
    if endpoint is None:
        raise Http404
    return endpoint


class EndpointListApi(generics.ListAPIView):
    serializer_class = EndpointSerializer

    def get_queryset(self):
        return selectors.endpoint_list(acting=acting_for_request(self.request))

    @extend_schema(
        request=EndpointInSerializer,
        examples=[
            OpenApiExample(
                "Every allocation event to a training pipeline",
                request_only=True,
                value={
                    "url": "https://ci.example.com/anchorgpu/webhooks",
                    "events": [
                        "booking.created",
                        "allocation.started",
                        "allocation.expiring",
                        "allocation.expired",
                    ],
                    "description": "training pipeline",
                },
            )
        ],  # fmt: skip
        responses={201: EndpointCreatedSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM},
    )
    def post(self, request):
        data = EndpointInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint, secret = services.endpoint_create(
            acting=acting_for_request(request), **data.validated_data
        )
        endpoint.secret = secret
        return Response(EndpointCreatedSerializer(endpoint).data, status=status.HTTP_201_CREATED)


class EndpointDetailApi(APIView):
    @extend_schema(responses={200: EndpointSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        return Response(EndpointSerializer(_endpoint(request, pk)).data)

    @extend_schema(
        request=EndpointChangeSerializer,
        responses={200: EndpointSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def patch(self, request, pk):
        endpoint = _endpoint(request, pk)
        data = EndpointChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint = services.endpoint_update(
            acting=acting_for_request(request), endpoint=endpoint, **data.validated_data
        )
        return Response(EndpointSerializer(endpoint).data)

    @extend_schema(responses={204: None, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM})
    def delete(self, request, pk):
        services.endpoint_delete(
            acting=acting_for_request(request), endpoint=_endpoint(request, pk)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class EndpointTestApi(APIView):
    """Send a signed `webhook.test` message to the endpoint now."""

    @extend_schema(
        request=None,
        responses={202: DeliverySerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        delivery = services.endpoint_test(
            acting=acting_for_request(request), endpoint=_endpoint(request, pk)
        )
        return Response(DeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class DeliveryListApi(generics.ListAPIView):
    """The endpoint's deliveries, newest first: status, response code, attempts."""

    serializer_class = DeliverySerializer

    def get_queryset(self):
        return selectors.delivery_log(endpoint=_endpoint(self.request, self.kwargs["pk"]))

    @extend_schema(responses={200: DeliverySerializer(many=True), 401: PROBLEM, 404: PROBLEM})
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)
