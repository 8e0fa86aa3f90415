"""Fleet health and flags, for staff."""

from django.db.models import F
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import Node
from core.problems import PROBLEM
from telemetry.agents import agent_credential_issue, agent_credential_revoke
from telemetry.api.serializers import (
    FlagAcknowledgeSerializer,
    FlagFilterSerializer,
    FlagSerializer,
    NodeSerializer,
)
from telemetry.models import Flag
from telemetry.selectors import flag_list
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


class NodeAgentCredentialApi(APIView):
    """A node agent's credential (staff): a new one replaces the old; DELETE revokes it."""

    permission_classes = [permissions.IsAdminUser]

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
