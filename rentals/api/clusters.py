"""Clusters in the API: read one as a whole, and act on every node at once. Cancel and
extend go through any of its allocations' endpoints too (they act on the whole cluster)."""

from typing import ClassVar, Protocol

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.roles import Acting, acting_for_request
from core.problems import PROBLEM
from rentals import selectors, services
from rentals.api.allocations import extend_from_request, extension_quote_response
from rentals.api.bookings import IDEMPOTENCY_HEADER
from rentals.api.serializers import (
    ClusterSerializer,
    ExtendInSerializer,
    ExtensionQuoteInSerializer,
    QuoteSerializer,
)
from rentals.idempotency import idempotent
from rentals.models import Cluster


def _cluster(request, pk, *, act=False):
    acting = acting_for_request(request)
    cluster, members = selectors.cluster_get(acting=acting, pk=pk)
    if cluster is None:
        raise Http404
    if act:
        selectors.allocation_act_check(acting=acting, allocation=members[0])
    return cluster, members


def _fresh(request, pk):
    return ClusterSerializer(selectors.cluster_summary(*_cluster(request, pk))).data


CLUSTER_ACTION = {200: ClusterSerializer, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM}


class ClusterDetailApi(APIView):
    @extend_schema(responses={200: ClusterSerializer, 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        return Response(_fresh(request, pk))


class _ClusterAction(Protocol):
    """rentals.services.cluster_<action>."""

    def __call__(self, *, acting: Acting, cluster: Cluster) -> object: ...


class _ClusterActionApi(APIView):
    service: ClassVar[_ClusterAction]  # each action's own, as a staticmethod

    @extend_schema(request=None, responses=CLUSTER_ACTION)
    def post(self, request, pk):
        cluster, _members = _cluster(request, pk, act=True)
        type(self).service(acting=acting_for_request(request), cluster=cluster)
        return Response(_fresh(request, pk))


class ClusterStopApi(_ClusterActionApi):
    service = staticmethod(services.cluster_stop)


class ClusterStartApi(_ClusterActionApi):
    service = staticmethod(services.cluster_start)


class ClusterCancelApi(_ClusterActionApi):
    service = staticmethod(services.cluster_cancel)


class ClusterExtensionQuoteApi(APIView):
    """The price of extending every node by whole periods, as a quote to read first."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "quote"

    @extend_schema(
        request=ExtensionQuoteInSerializer,
        responses={201: QuoteSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM,
                   409: PROBLEM, 429: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        _cluster_row, members = _cluster(request, pk, act=True)
        return extension_quote_response(request, members[0])


class ClusterExtendApi(APIView):
    """Extend every node of the cluster by an extension quote's periods, or none."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "purchase"

    @extend_schema(
        request=ExtendInSerializer,
        parameters=[IDEMPOTENCY_HEADER],
        responses={**CLUSTER_ACTION, 400: PROBLEM, 422: PROBLEM, 429: PROBLEM},
    )
    @idempotent(purchase=True)
    def post(self, request, pk):
        _cluster_row, members = _cluster(request, pk, act=True)
        extend_from_request(request, members[0])
        return Response(_fresh(request, pk))
