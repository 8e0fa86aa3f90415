"""POST /api/v1/sizing/: anyone may ask (throttled); nothing is stored."""

from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from catalog.models import GpuModel
from sizing.components import ComponentError
from sizing.diffusion import DTYPES, DiffusionWorkload
from sizing.diffusion import PRESETS as PIPELINE_PRESETS
from sizing.diffusion_services import (
    component_error_words,
    pipeline_from_request,
    size_diffusion,
)
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


class PipelineSerializer(serializers.Serializer):
    """A preset, or a pipeline's model_index.json with its components' configs."""

    preset = serializers.ChoiceField(choices=sorted(PIPELINE_PRESETS), required=False)
    model_index = serializers.DictField(required=False, help_text="diffusers' model_index.json")
    components = serializers.DictField(
        required=False, child=serializers.DictField(),
        help_text="each component's config.json by its name in model_index (unet, vae, …)",
    )  # fmt: skip

    def validate_components(self, value):
        if len(value) > 16 or any(len(c) > CONFIG_MAX_KEYS for c in value.values()):
            raise serializers.ValidationError(_("At most 16 components of 200 keys each."))
        return value

    def validate(self, data):
        given = [k for k in ("preset", "model_index") if k in data]
        if len(given) != 1:
            raise serializers.ValidationError(
                _("Give exactly one of `preset` or `model_index` (with `components`).")
            )
        try:
            data["built"] = pipeline_from_request(data)
        except ComponentError as exc:
            path, words = component_error_words(exc)
            error: dict | list = [words]
            for key in reversed(path):
                error = {key: error}
            raise serializers.ValidationError(error) from exc
        return data


class DiffusionSerializer(serializers.Serializer):
    mode = serializers.ChoiceField(["inference", "lora", "full"], default="inference")
    height = serializers.IntegerField(min_value=1, max_value=8192, default=1024)
    width = serializers.IntegerField(min_value=1, max_value=8192, default=1024)
    batch = serializers.IntegerField(min_value=1, max_value=64, default=1)
    guidance = serializers.BooleanField(
        required=False, allow_null=True, default=None,
        help_text="classifier-free guidance (doubles the denoiser's batch); null: the "
        "pipeline's default (on, except FLUX, which is guidance-distilled)",
    )  # fmt: skip
    denoiser_dtype = serializers.ChoiceField(DTYPES, default="bf16")
    text_encoder_dtype = serializers.ChoiceField(DTYPES, default="bf16")
    attention = serializers.ChoiceField(["efficient", "naive"], default="efficient")
    vae_tiling = serializers.BooleanField(default=False)
    vae_tile = serializers.IntegerField(min_value=64, max_value=4096, required=False)
    vae_tile_overlap = serializers.FloatField(min_value=0.0, max_value=0.75, default=0.25)
    vae_slicing = serializers.BooleanField(default=False)
    offload = serializers.ChoiceField(["none", "model", "sequential"], default="none")
    gradient_checkpointing = serializers.BooleanField(default=True)
    optimizer = serializers.ChoiceField(["adamw", "adamw8bit"], default="adamw")
    cache_latents = serializers.BooleanField(default=True)
    cache_text_embeddings = serializers.BooleanField(default=True)
    lora_rank = serializers.IntegerField(min_value=1, max_value=1024, default=16)
    memory_utilization = serializers.FloatField(min_value=0.1, max_value=1.0, default=0.95)


class SizingInSerializer(serializers.Serializer):
    model = ModelSerializer(required=False)
    pipeline = PipelineSerializer(required=False)
    diffusion = DiffusionSerializer(required=False)
    workload = serializers.ChoiceField(["inference", "training", "diffusion"])
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
        if data["workload"] == "diffusion":
            return self._validate_diffusion(data)
        if "model" not in data:
            raise serializers.ValidationError({"model": [_("This field is required.")]})
        training = data.get("training") or {}
        if training.get("method") in ("lora", "qlora") and "parameters" in data["model"]:
            raise serializers.ValidationError(
                {"training": _("LoRA needs the architecture: give a preset or a config.json.")}
            )
        return data

    def _validate_diffusion(self, data):
        if "pipeline" not in data:
            raise serializers.ValidationError({"pipeline": [_("This field is required.")]})
        pipeline = data["pipeline"]["built"]
        settings = data.get("diffusion") or DiffusionSerializer().to_internal_value({})
        step = pipeline.factor * max(
            (d.shape.get("patch", 1) for d in pipeline.denoisers), default=1
        )
        errors = {}
        for name in ("height", "width"):
            if settings[name] % step:
                errors[name] = [
                    _("%(field)s must be a multiple of %(step)s: the VAE downsamples by "
                      "%(factor)s and the denoiser takes %(patch)s × %(patch)s patches.")
                    % {"field": name, "step": step, "factor": pipeline.factor,
                       "patch": step // pipeline.factor}
                ]  # fmt: skip
        if errors:
            raise serializers.ValidationError({"diffusion": errors})
        if settings["mode"] != "inference" and settings["offload"] != "none":
            raise serializers.ValidationError(
                {"diffusion": {"offload": [_("Offload is sized for inference only.")]}}
            )
        data["diffusion"] = settings
        return data


def sizing_answer(data: dict) -> dict:
    """Validated input (SizingInSerializer) → the answer."""
    if data["workload"] == "diffusion":
        settings = dict(data["diffusion"])
        return size_diffusion(
            pipeline=data["pipeline"]["built"], workload=DiffusionWorkload(**settings),
            gpu_model=data.get("gpu_model"), gpu_count=data.get("gpu_count"),
        )  # fmt: skip
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


class SizingQuoteLineSerializer(serializers.Serializer):
    kind = serializers.CharField()
    quantity = serializers.IntegerField()
    unit_price = serializers.DecimalField(max_digits=14, decimal_places=2)
    amount = serializers.DecimalField(max_digits=14, decimal_places=2)


class CheapestQuoteSerializer(serializers.Serializer):
    """The cheapest fitting configuration's complete quote for one of its model's shortest
    period, taxed as a consumer's (a team's own quote applies its treatment)."""

    gpu_model = serializers.CharField()
    gpu_count = serializers.IntegerField()
    period = serializers.CharField()
    period_count = serializers.IntegerField()
    lines = SizingQuoteLineSerializer(many=True)
    net_total = serializers.DecimalField(max_digits=14, decimal_places=2)
    tax_treatment = serializers.CharField()
    vat_rate = serializers.DecimalField(max_digits=5, decimal_places=4)
    vat_total = serializers.DecimalField(max_digits=14, decimal_places=2)
    total = serializers.DecimalField(max_digits=14, decimal_places=2)
    currency = serializers.CharField()
    book_path = serializers.CharField()


class SizingSerializer(serializers.Serializer):
    parameters = serializers.IntegerField()
    active_parameters = serializers.IntegerField()
    weights_bytes = serializers.IntegerField()
    kv_cache_bytes_per_token = serializers.IntegerField(allow_null=True)
    candidates = CandidateSerializer(many=True)
    cheapest_quote = CheapestQuoteSerializer(allow_null=True)
    caveats = CaveatSerializer(many=True)
    disclaimer = serializers.CharField()


class ComponentSerializer(serializers.Serializer):
    name = serializers.CharField()
    class_name = serializers.CharField()
    role = serializers.CharField()
    parameters = serializers.IntegerField()
    weights_bytes = serializers.IntegerField()


class PhaseSerializer(serializers.Serializer):
    phase = serializers.CharField(
        help_text="text_encoders, denoise, refine, decode, safety_check, train_step"
    )
    title = serializers.CharField()
    components = serializers.ListField(child=serializers.CharField())
    resident_bytes = serializers.IntegerField(help_text="weights (and training states) on the GPU")
    activations_bytes = serializers.IntegerField()
    total_bytes = serializers.IntegerField()


class PeakSerializer(serializers.Serializer):
    phase = serializers.CharField()
    bytes = serializers.IntegerField()
    text = serializers.CharField()


class AdviceSerializer(serializers.Serializer):
    code = serializers.CharField()
    bytes = serializers.IntegerField(help_text="the peak it would bring")
    text = serializers.CharField()


class DiffusionCandidateSerializer(CandidateSerializer):
    components_per_gpu = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField())
    )


class DiffusionSizingSerializer(serializers.Serializer):
    workload = serializers.CharField()
    pipeline_name = serializers.CharField()
    parameters = serializers.IntegerField()
    components = ComponentSerializer(many=True)
    phases = PhaseSerializer(many=True)
    peak = PeakSerializer()
    advice = AdviceSerializer(many=True)
    candidates = DiffusionCandidateSerializer(many=True)
    cheapest_quote = CheapestQuoteSerializer(allow_null=True)
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
            200: PolymorphicProxySerializer(
                component_name="SizingAnswer",
                serializers=[SizingSerializer, DiffusionSizingSerializer],
                resource_type_field_name=None,
            ),
            400: OpenApiResponse(description="Problem details with field errors"),
            429: OpenApiResponse(description="Problem details: throttled"),
        },
    )
    def post(self, request):
        body = SizingInSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        answer = sizing_answer(body.validated_data)
        if body.validated_data["workload"] == "diffusion":
            return Response(DiffusionSizingSerializer(answer).data)
        return Response(SizingSerializer(answer).data)
