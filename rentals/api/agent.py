"""The node agent protocol: desired state in, report out. A node's agent pulls its state
(an unchanged one answers 304 to its ETag) and says what it applied; AnchorGPU never needs
to reach a node. An agent credential sees its own node only."""

from django.http import HttpResponseNotModified
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from core.problems import PROBLEM
from rentals.access import agent_poll
from rentals.services.access import access_report
from telemetry.agents import (
    AgentAuthentication,
    IsNodeAgent,
    agent_state_served,
    credential_hash,
    invalid_credential,
)

MAX_ENTRIES = 256


class AgentGpuSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    uuid = serializers.CharField()


class AgentAllocationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    login = serializers.CharField(help_text="the tenant's account on the node")
    state = serializers.CharField()
    granted = serializers.BooleanField(help_text="true only while running: keys in, GPUs usable")
    paid_from = serializers.DateTimeField()
    paid_until = serializers.DateTimeField(help_text="revoke at this instant, reachable or not")
    gpus = AgentGpuSerializer(many=True)
    keys = serializers.ListField(child=serializers.CharField(), help_text="authorized_keys lines")
    cpus = serializers.IntegerField(help_text="vCPUs sold with its GPUs: CPU time to allow")
    memory_mib = serializers.IntegerField(help_text="host memory sold with its GPUs (MiB)")


class AgentStateSerializer(serializers.Serializer):
    generation = serializers.CharField(help_text="the state's digest, also its ETag")
    node = serializers.CharField()
    vendor = serializers.ChoiceField(choices=["nvidia", "amd"], help_text="the GPUs' driver")
    gpu_variable = serializers.CharField(help_text="CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES")
    allocations = AgentAllocationSerializer(many=True)


class AgentErrorSerializer(serializers.Serializer):
    allocation = serializers.UUIDField(required=False, allow_null=True)
    detail = serializers.CharField(max_length=500)


class AgentSoftwareGpuSerializer(serializers.Serializer):
    index = serializers.IntegerField(required=False, min_value=0, max_value=255)
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    compute_cap = serializers.CharField(required=False, allow_blank=True, max_length=20)
    gfx_target = serializers.CharField(required=False, allow_blank=True, max_length=20)


class AgentSoftwareSerializer(serializers.Serializer):
    vendor = serializers.CharField(required=False, allow_blank=True, max_length=20)
    driver = serializers.CharField(required=False, allow_blank=True, max_length=80)
    cuda = serializers.CharField(required=False, allow_blank=True, max_length=80)
    rocm = serializers.CharField(required=False, allow_blank=True, max_length=80)
    amdgpu = serializers.CharField(required=False, allow_blank=True, max_length=80)
    os = serializers.CharField(required=False, allow_blank=True, max_length=200)
    kernel = serializers.CharField(required=False, allow_blank=True, max_length=200)
    # many=True hands max_length to the ListSerializer; the stubs' __init__ omits it.
    gpus = AgentSoftwareGpuSerializer(many=True, required=False, max_length=64)  # type: ignore[call-arg]


class AgentReportSerializer(serializers.Serializer):
    generation = serializers.CharField(max_length=64)
    applied = serializers.ListField(
        child=serializers.UUIDField(), max_length=MAX_ENTRIES,
        help_text="the allocations of that state now in place on the node",
    )  # fmt: skip
    # A declared field: DRF's metaclass takes it off the class, `Serializer.errors` stays;
    # many=True hands max_length to the ListSerializer, which the stubs' __init__ omits.
    errors = AgentErrorSerializer(  # type: ignore[assignment, call-arg]
        many=True, required=False, default=list, max_length=MAX_ENTRIES
    )
    agent = serializers.CharField(max_length=40, required=False, default="", allow_blank=True)
    software = AgentSoftwareSerializer(
        required=False, help_text="the node's software stack (nodeagent.software); absent: "
        "unchanged",
    )  # fmt: skip


class _AgentApi(APIView):
    authentication_classes = [AgentAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes = []  # one node, every few seconds: its credential is the limit


class AgentStateApi(APIView):
    """The hot path: 12,500 nodes every 10 s. One statement checks the credential, notes
    the agent's sign of life and reads the node's state; an unchanged state is a bare 304."""

    authentication_classes = []  # the poll's own statement checks the credential
    permission_classes = [permissions.AllowAny]
    throttle_classes = []

    def get_authenticate_header(self, request):
        return AgentAuthentication.keyword

    @extend_schema(
        # drf-spectacular's hint says names; it takes security requirements, as here.
        auth=[{"agentAuth": []}],  # type: ignore[list-item]
        responses={200: AgentStateSerializer, 304: OpenApiResponse(description="unchanged"),
                   401: PROBLEM},
    )  # fmt: skip
    def get(self, request):
        """The node's desired state; send its ETag back in `If-None-Match`."""
        key_hash = credential_hash(request)
        poll = agent_poll(key_hash=key_hash) if key_hash else None
        if poll is None:
            raise invalid_credential() if key_hash else NotAuthenticated()
        generation = poll.state["generation"]
        if generation != poll.served_generation:
            agent_state_served(
                agent_id=poll.agent_id, generation=generation, state=poll.state, at=poll.now
            )
        etag = f'"{generation}"'
        if etag in request.headers.get("If-None-Match", ""):
            response = HttpResponseNotModified()
            response["ETag"] = etag
            return response
        return Response(poll.state, headers={"ETag": etag, "Cache-Control": "no-cache"})


class AgentReportApi(_AgentApi):
    @extend_schema(
        request=AgentReportSerializer,
        responses={204: None, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM},
    )
    def post(self, request):
        """What the agent applied of the state it last fetched, and what failed."""
        data = AgentReportSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        report = data.validated_data
        access_report(
            agent=request.auth,
            generation=report["generation"],
            applied=report["applied"],
            errors=report["errors"],
            version=report["agent"],
            software=report.get("software"),
        )
        return Response(status=status.HTTP_204_NO_CONTENT)
