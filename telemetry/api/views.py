"""Fleet health and flags, for staff; the nodes as targets for the operator's engine."""

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import F
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.utils.crypto import constant_time_compare
from django.utils.translation import gettext as _
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, generics, permissions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from catalog.models import Node
from core.authentication import authorization_credential
from core.problems import PROBLEM
from telemetry.agents import agent_credential_issue, agent_credential_revoke
from telemetry.api.serializers import (
    FlagAcknowledgeSerializer,
    FlagFilterSerializer,
    FlagSerializer,
    NodeSerializer,
    PrometheusTargetSerializer,
)
from telemetry.models import Flag
from telemetry.selectors import flag_list, prometheus_targets
from telemetry.services import flag_acknowledge


class NodeListApi(generics.ListAPIView):
    """Fleet health, for staff."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = NodeSerializer
    queryset = (
        Node.objects.select_related("region", "gpu_model", "agent")
        .annotate(gpu_total=F("gpu_count"))
        .order_by("hostname")
    )


class AgentCredentialSerializer(serializers.Serializer):
    credential = serializers.CharField(help_text="shown once: `Authorization: Agent <credential>`")


class MayChangeNodes(permissions.BasePermission):
    """Staff who may change nodes (`catalog.change_node`, as the admin's agent actions ask):
    a new credential cuts the node's running agent off, which read-only staff never may."""

    def has_permission(self, request, view):
        user = request.user
        return bool(user and user.is_staff and user.has_perm("catalog.change_node"))


class NodeAgentCredentialApi(APIView):
    """A node agent's credential (staff who may change nodes): a new one replaces the old;
    DELETE revokes it."""

    permission_classes = [MayChangeNodes]

    @extend_schema(request=None, responses={201: AgentCredentialSerializer, 403: PROBLEM,
                                            404: PROBLEM})  # fmt: skip
    def post(self, request, hostname):
        node = get_object_or_404(Node, hostname=hostname)
        secret = agent_credential_issue(node=node, by=request.user)
        answer = AgentCredentialSerializer({"credential": secret})
        return Response(answer.data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None, 403: PROBLEM, 404: PROBLEM})
    def delete(self, request, hostname):
        node = get_object_or_404(Node, hostname=hostname)
        if not agent_credential_revoke(node=node):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)


class FlagListApi(generics.ListAPIView):
    """Flags for staff: open ones by default; `state=closed` is the history."""

    permission_classes = [permissions.IsAdminUser]
    serializer_class = FlagSerializer

    def get_queryset(self):
        filters = FlagFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return flag_list(**filters.validated_data)

    @extend_schema(parameters=[FlagFilterSerializer])
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class FlagAcknowledgeApi(APIView):
    """Staff have seen a flag: their note is kept. An XID closes; a condition that still
    holds stays open, marked seen."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(
        request=FlagAcknowledgeSerializer,
        responses={200: FlagSerializer, 400: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )
    def post(self, request, pk):
        body = FlagAcknowledgeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        flag = get_object_or_404(Flag, pk=pk)
        flag = flag_acknowledge(flag=flag, user=request.user, note=body.validated_data["note"])
        return Response(FlagSerializer(flag_list(state="all").get(pk=flag.pk)).data)


class SdSecretAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <PROMETHEUS_SD_TOKEN>`: the operator's engine has no user of
    its own. Any other credential goes on to the usual classes (a staff API token)."""

    def authenticate(self, request):
        secret = settings.ANCHORGPU["PROMETHEUS"]["SD_TOKEN"]
        if not secret:
            return None
        credential = authorization_credential(
            request, "Bearer", invalid=_("Invalid Authorization header.")
        )
        if credential is None or not constant_time_compare(credential, secret):
            return None
        return AnonymousUser(), SD_SECRET

    def authenticate_header(self, request):
        return "Bearer"


SD_SECRET = "prometheus-sd-secret"


class StaffOrSdSecret(permissions.BasePermission):
    def has_permission(self, request, view):
        if request.auth == SD_SECRET:
            return True
        return bool(request.user and request.user.is_authenticated and request.user.is_staff)


class PrometheusTargetsApi(APIView):
    """The active nodes as Prometheus `http_sd_configs` targets (Prometheus and VictoriaMetrics
    read it): each node's exporter URL as `__address__`, `__metrics_path__` and `__scheme__`,
    labelled with its hostname, model and region, so one exporter port can serve many nodes
    and the engine's series say whose they are. Staff API tokens or PROMETHEUS_SD_TOKEN."""

    # The stubs type the setting as the dotted paths settings.py writes; DRF imports them.
    authentication_classes = [SdSecretAuthentication, *api_settings.DEFAULT_AUTHENTICATION_CLASSES]  # type: ignore[list-item]
    permission_classes = [StaffOrSdSecret]
    renderer_classes = [JSONRenderer]
    pagination_class = None

    @extend_schema(responses={200: PrometheusTargetSerializer(many=True), 401: PROBLEM,
                              403: PROBLEM})  # fmt: skip
    def get(self, request):
        return Response(PrometheusTargetSerializer(prometheus_targets(), many=True).data)
