"""POST /api/v1/compatibility/: "Will it run?" for anyone (throttled); nothing is stored."""

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from sizing.compat_services import compatibility_check
from sizing.compatibility import FEATURES


class CompatibilityInSerializer(serializers.Serializer):
    framework = serializers.CharField(
        max_length=40, help_text="pytorch, vllm, or cuda (a bare CUDA toolkit)"
    )
    version = serializers.CharField(max_length=40, help_text="2.7, 0.32, 12.6…")
    build = serializers.CharField(
        max_length=40, required=False, allow_blank=True, default="",
        help_text="cu128, rocm6.3…; empty for a bare CUDA toolkit",
    )  # fmt: skip
    features = serializers.ListField(
        child=serializers.CharField(max_length=40), required=False, default=list,
        max_length=len(FEATURES), help_text="bf16, fp8, flash-attention-2, flash-attention-3",
    )  # fmt: skip


class CompatibilitySourceSerializer(serializers.Serializer):
    key = serializers.CharField(help_text="docs/reference/software-compatibility.md §7")
    where = serializers.CharField()
    read_on = serializers.DateField()


class CompatibilityReasonSerializer(serializers.Serializer):
    rule = serializers.CharField()
    ok = serializers.BooleanField(allow_null=True, help_text="null: not confirmed or unknown")
    text = serializers.CharField(help_text="in the language asked for")
    sources = CompatibilitySourceSerializer(many=True)


class CompatibilityStackSerializer(serializers.Serializer):
    driver = serializers.CharField(help_text="empty: unknown")
    cuda = serializers.CharField(help_text="the highest CUDA the driver supports")
    rocm = serializers.CharField()


class CompatibilityModelAnswerSerializer(serializers.Serializer):
    gpu_model = serializers.SlugField()
    gpu_model_name = serializers.CharField()
    compute_target = serializers.CharField()
    stack = CompatibilityStackSerializer()
    gpus = serializers.IntegerField(help_text="GPUs on active nodes with this stack")
    regions = serializers.ListField(child=serializers.SlugField())
    runs = serializers.BooleanField(allow_null=True, help_text="null: unknown")
    reasons = CompatibilityReasonSerializer(many=True)


class CompatibilityReferenceRowSerializer(serializers.Serializer):
    origin = serializers.CharField(help_text="shipped or staff")
    # A declared field: DRF's metaclass takes it off the class, `Field.source` stays.
    source = serializers.CharField()  # type: ignore[assignment]
    read_on = serializers.DateField()
    staff = serializers.BooleanField(help_text="a row staff added: theirs")


class CompatibilityAnswerSerializer(serializers.Serializer):
    framework = serializers.CharField()
    version = serializers.CharField()
    build = serializers.CharField()
    stack = serializers.CharField(help_text="cuda or rocm")
    toolkit = serializers.CharField(help_text="the CUDA or ROCm version it was built with")
    features = serializers.ListField(child=serializers.CharField())
    reference = CompatibilityReferenceRowSerializer(allow_null=True)
    requires = serializers.DictField(
        child=serializers.CharField(), help_text="what a booking from this answer asks"
    )
    answers = CompatibilityModelAnswerSerializer(many=True)
    not_covered = serializers.ListField(child=serializers.CharField())
    not_checked = serializers.CharField()
    glossary = serializers.ListField(child=serializers.SlugField())
    disclaimer = serializers.CharField()


class CompatibilityApi(APIView):
    """Will it run? For a framework build (or a bare CUDA toolkit), per GPU model and
    software stack in the catalog: `runs` yes, no or unknown, with the reasons and their
    sources. A check of versions, not a guarantee for a workload."""

    permission_classes = [permissions.AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "sizing"

    @extend_schema(
        request=CompatibilityInSerializer,
        examples=[
            OpenApiExample(
                "PyTorch 2.7 for CUDA 12.8 with BF16",
                request_only=True,
                value={
                    "framework": "pytorch",
                    "version": "2.7",
                    "build": "cu128",
                    "features": ["bf16"],
                },  # fmt: skip
            )
        ],
        responses={
            200: CompatibilityAnswerSerializer,
            400: OpenApiResponse(description="Problem details with field errors"),
            429: OpenApiResponse(description="Problem details: throttled"),
        },
    )
    def post(self, request):
        body = CompatibilityInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        answer = compatibility_check(**body.validated_data)
        return Response(CompatibilityAnswerSerializer(answer).data)
