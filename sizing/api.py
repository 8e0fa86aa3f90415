"""POST /api/v1/sizing/: anyone may ask (throttled); nothing is stored."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from catalog.models import GpuModel
from sizing.estimator import WEIGHT_FORMATS, ArchitectureError, Inference, Training
from sizing.presets import PRESETS
from sizing.services import model_from_request, size

CONFIG_MAX_KEYS = 200


class ModelSerializer(serializers.Serializer):
    """Exactly one of: a preset, a pasted config.json, or a parameter count."""

    preset = serializers.ChoiceField(choices=sorted(PRESETS), required=False)
    config = serializers.DictField(required=False, help_text="a Hugging Face config.json")
    parameters = serializers.IntegerField(required=False, min_value=1, max_value=10**14)
    largest_layer_parameters = serializers.IntegerField(
        required=False, min_value=1, max_value=10**14
    )
    has_vae = serializers.BooleanField(
        required=False, default=False,
        help_text="with `parameters`: the model is a diffusion pipeline with a VAE, whose "
        "decode can peak on its own (the presets and config.json families are decoder LLMs)",
    )  # fmt: skip

    def validate_config(self, value):
        if len(value) > CONFIG_MAX_KEYS:
            raise serializers.ValidationError(_("A config.json has at most 200 keys here."))
        return value

    def validate(self, data):
        given = [k for k in ("preset", "config", "parameters") if k in data]
        if len(given) != 1:
            raise serializers.ValidationError(
                _("Give exactly one of `preset`, `config` or `parameters`.")
            )
        if data.get("has_vae") and "parameters" not in data:
            raise serializers.ValidationError(
                {"has_vae": [_("A VAE goes with a parameter count: the presets and "
                               "config.json families are language models.")]}
            )  # fmt: skip
        if "config" in data:
            try:
                model_from_request(data)
            except ArchitectureError as exc:
                raise serializers.ValidationError(
                    {"config": [str(exc)], "fields": exc.fields}
                ) from exc
        return data


class InferenceSerializer(serializers.Serializer):
    context_tokens = serializers.IntegerField(min_value=1, max_value=2**21, default=8192)
    concurrent_sequences = serializers.IntegerField(min_value=1, max_value=4096, default=1)
    kv_cache_dtype = serializers.ChoiceField(["auto", "bf16", "fp16", "fp8"], default="auto")
    memory_utilization = serializers.FloatField(min_value=0.1, max_value=1.0, default=0.90)


class TrainingSerializer(serializers.Serializer):
    method = serializers.ChoiceField(["full", "lora", "qlora"], default="full")
    optimizer = serializers.ChoiceField(["adamw", "sgd"], default="adamw")
    precision = serializers.ChoiceField(["mixed", "fp32"], default="mixed")
    strategy = serializers.ChoiceField(["ddp", "fsdp", "zero2", "zero3"], default="ddp")
    offload = serializers.ChoiceField(["none", "optimizer", "optimizer_and_params"], default="none")
    gpus = serializers.IntegerField(min_value=1, max_value=8, required=False)
    micro_batch = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    sequence_length = serializers.IntegerField(min_value=1, max_value=2**21, default=2048)
    activation_checkpointing = serializers.ChoiceField(
        ["none", "selective", "full"], default="none"
    )
    lora_rank = serializers.IntegerField(min_value=1, max_value=1024, default=16)


class SizingInSerializer(serializers.Serializer):
    model = ModelSerializer()
    workload = serializers.ChoiceField(["inference", "training"])
    weights_dtype = serializers.ChoiceField(WEIGHT_FORMATS, default="bf16")
    inference = InferenceSerializer(required=False)
    training = TrainingSerializer(required=False)
    gpu_model = serializers.SlugField(required=False)
    gpu_count = serializers.ChoiceField([1, 2, 4, 8], required=False)

    def validate_gpu_model(self, value):
        if not GpuModel.objects.filter(slug=value, is_active=True).exists():
            raise serializers.ValidationError(_("Unknown GPU model: %(slug)s.") % {"slug": value})
        return value

    def validate(self, data):
        training = data.get("training") or {}
        if training.get("method") in ("lora", "qlora") and "parameters" in data["model"]:
            raise serializers.ValidationError(
                {"training": _("LoRA needs the architecture: give a preset or a config.json.")}
            )
        return data


def sizing_answer(data: dict) -> dict:
    """Validated input (SizingInSerializer) → the answer."""
    training = dict(data.get("training") or {})
    gpus = training.pop("gpus", None)
    return size(
        model=model_from_request(data["model"]),
        workload=data["workload"],
        weights_dtype=data["weights_dtype"],
        inference=Inference(**(data.get("inference") or {})),
        training=Training(**training),
        gpu_model=data.get("gpu_model"),
        gpu_count=data.get("gpu_count") or (gpus if data["workload"] == "training" else None),
    )


class PerGpuSerializer(serializers.Serializer):
    weights_bytes = serializers.IntegerField()
    kv_cache_bytes = serializers.IntegerField()
    gradients_bytes = serializers.IntegerField()
    optimizer_bytes = serializers.IntegerField()
    model_states_bytes = serializers.IntegerField()
    activations_bytes = serializers.IntegerField()
    overhead_bytes = serializers.IntegerField()
    total_bytes = serializers.IntegerField()


class CandidateSerializer(serializers.Serializer):
    gpu_model = serializers.CharField()
    gpu_count = serializers.IntegerField()
    parallelism = serializers.CharField()
    per_gpu = PerGpuSerializer()
    device_bytes = serializers.IntegerField(help_text="what one device reports")
    device_measured = serializers.BooleanField(help_text="reported by the fleet's telemetry")
    usable_bytes_per_gpu = serializers.IntegerField()
    fits = serializers.BooleanField()
    headroom_bytes = serializers.IntegerField()
    max_concurrent_sequences = serializers.IntegerField(allow_null=True)
    caveats = serializers.ListField(child=serializers.CharField())


class CaveatSerializer(serializers.Serializer):
    code = serializers.CharField()
    title = serializers.CharField(help_text="a few words, in the reader's language")
    text = serializers.CharField()
    glossary = serializers.CharField(allow_null=True)


class SizingSerializer(serializers.Serializer):
    parameters = serializers.IntegerField()
    active_parameters = serializers.IntegerField()
    weights_bytes = serializers.IntegerField()
    kv_cache_bytes_per_token = serializers.IntegerField(allow_null=True)
    candidates = CandidateSerializer(many=True)
    caveats = CaveatSerializer(many=True)
    disclaimer = serializers.CharField()


class SizingApi(APIView):
    """Will it fit? Per-GPU memory for a model and a workload on every catalog GPU at 1, 2,
    4 and 8 GPUs (or the one configuration asked for). An estimate, not a guarantee."""

    permission_classes = [permissions.AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "sizing"

    @extend_schema(
        request=SizingInSerializer,
        responses={
            200: SizingSerializer,
            400: OpenApiResponse(description="Problem details with field errors"),
            429: OpenApiResponse(description="Problem details: throttled"),
        },
    )
    def post(self, request):
        body = SizingInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return Response(SizingSerializer(sizing_answer(body.validated_data)).data)
