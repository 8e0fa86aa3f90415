"""The "Will it fit?" form: the same request as the API, validated by the API's serializer."""

import json

from django import forms
from django.utils.translation import gettext_lazy as _

from sizing.api import SizingInSerializer
from sizing.diffusion import DTYPES
from sizing.diffusion import PRESETS as PIPELINE_PRESETS
from sizing.estimator import WEIGHT_FORMATS
from sizing.presets import PRESETS

FORMAT_NAMES = {
    "fp32": "FP32", "bf16": "BF16", "fp16": "FP16", "fp8": "FP8", "int8": "INT8",
    "int4_gptq": "INT4 GPTQ (g128)", "int4_awq": "INT4 AWQ (g128)", "nf4": "NF4 (QLoRA)",
}  # fmt: skip


INFERENCE_FIELDS = (
    "context_tokens",
    "concurrent_sequences",
    "kv_cache_dtype",
    "memory_utilization",
)
TRAINING_FIELDS = (
    "method", "optimizer", "precision", "strategy", "offload", "micro_batch",
    "sequence_length", "activation_checkpointing", "lora_rank",
)  # fmt: skip
DIFFUSION_FIELDS = (
    "diffusion_mode", "height", "width", "batch", "denoiser_dtype", "text_encoder_dtype",
    "diffusion_offload", "attention", "vae_tiling", "vae_slicing", "diffusion_lora_rank",
)  # fmt: skip
WORKLOADS = ("inference", "training", "diffusion")


class SizingForm(forms.Form):
    """Bound from a page's query: what a shortened link leaves out is the form's default,
    and the other workload's fields are never read (an inference link needs no training
    field, and a stray one cannot fail it)."""

    def __init__(self, data=None, *args, **kwargs):
        super().__init__(None if data is None else self._completed(data), *args, **kwargs)

    @classmethod
    def _completed(cls, data) -> dict:
        given = {key: data.get(key) for key in data}
        fields = cls.base_fields
        if given.get("workload") not in WORKLOADS:
            given["workload"] = fields["workload"].initial
        read = {"inference": INFERENCE_FIELDS, "training": TRAINING_FIELDS,
                "diffusion": DIFFUSION_FIELDS}[given["workload"]]  # fmt: skip
        for name in ("weights_dtype", "pipeline", *INFERENCE_FIELDS, *TRAINING_FIELDS,
                     *DIFFUSION_FIELDS):  # fmt: skip
            if isinstance(fields[name], forms.BooleanField):
                if name not in read:
                    given.pop(name, None)
                continue
            if name not in read or given.get(name) in (None, ""):
                if name in ("weights_dtype", "pipeline") and given.get(name) not in (None, ""):
                    continue
                given[name] = fields[name].initial
        return given

    preset = forms.ChoiceField(
        label=_("Model"),
        choices=[("", _("— paste a config.json or give a parameter count —"))]
        + [(slug, p["name"]) for slug, p in PRESETS.items()],
        required=False,
        initial="llama-3-8b",
    )
    config = forms.CharField(
        label=_("or a config.json"), required=False, max_length=20000,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
    )  # fmt: skip
    parameters = forms.IntegerField(label=_("or a parameter count"), required=False, min_value=1)
    has_vae = forms.BooleanField(
        label=_("with a VAE (a diffusion pipeline; with a parameter count)"), required=False
    )
    workload = forms.ChoiceField(
        label=_("Workload"),
        choices=[("inference", _("Inference")), ("training", _("Training")),
                 ("diffusion", _("Diffusion pipeline"))],
        initial="inference",
        widget=forms.RadioSelect,
    )  # fmt: skip
    pipeline = forms.ChoiceField(
        label=_("Pipeline"), choices=[(slug, p.name) for slug, p in PIPELINE_PRESETS.items()],
        initial="flux-dev",
    )  # fmt: skip
    diffusion_mode = forms.ChoiceField(
        label=_("Task"),
        choices=[("inference", _("Generate images")), ("lora", _("LoRA fine-tuning")),
                 ("full", _("Full fine-tuning"))],
        initial="inference",
    )  # fmt: skip
    width = forms.IntegerField(label=_("Width (px)"), initial=1024, min_value=1)
    height = forms.IntegerField(label=_("Height (px)"), initial=1024, min_value=1)
    batch = forms.IntegerField(label=_("Images per step"), initial=1, min_value=1)
    denoiser_dtype = forms.ChoiceField(
        label=_("Denoiser weights"), choices=[(d, d.upper()) for d in DTYPES], initial="bf16"
    )
    text_encoder_dtype = forms.ChoiceField(
        label=_("Text encoder weights"), choices=[(d, d.upper()) for d in DTYPES], initial="bf16"
    )
    diffusion_offload = forms.ChoiceField(
        label=_("CPU offload"),
        choices=[("none", _("none")), ("model", _("model CPU offload")),
                 ("sequential", _("sequential offload"))],
        initial="none",
    )  # fmt: skip
    attention = forms.ChoiceField(
        label=_("Attention"),
        choices=[("efficient", _("memory-efficient (SDPA)")), ("naive", _("naive"))],
        initial="efficient",
    )
    vae_tiling = forms.BooleanField(label=_("VAE tiling"), required=False)
    vae_slicing = forms.BooleanField(label=_("VAE slicing"), required=False)
    diffusion_lora_rank = forms.IntegerField(label=_("LoRA rank"), initial=16, min_value=1)
    weights_dtype = forms.ChoiceField(
        label=_("Weight format"), choices=[(f, FORMAT_NAMES[f]) for f in WEIGHT_FORMATS],
        initial="bf16",
    )  # fmt: skip
    context_tokens = forms.IntegerField(label=_("Context (tokens)"), initial=8192, min_value=1)
    concurrent_sequences = forms.IntegerField(
        label=_("Concurrent sequences"), initial=1, min_value=1
    )
    kv_cache_dtype = forms.ChoiceField(
        label=_("KV cache precision"),
        choices=[("auto", _("as the model")), ("bf16", "BF16"), ("fp16", "FP16"), ("fp8", "FP8")],
        initial="auto",
    )
    memory_utilization = forms.FloatField(
        label=_("Engine memory utilisation"), initial=0.90, min_value=0.1, max_value=1.0
    )
    method = forms.ChoiceField(
        label=_("Method"),
        choices=[("full", _("Full fine-tuning")), ("lora", "LoRA"), ("qlora", "QLoRA")],
        initial="full",
    )
    optimizer = forms.ChoiceField(
        label=_("Optimizer"), choices=[("adamw", "AdamW"), ("sgd", "SGD")], initial="adamw"
    )
    precision = forms.ChoiceField(
        label=_("Precision"), choices=[("mixed", _("mixed (BF16/FP16)")), ("fp32", "FP32")],
        initial="mixed",
    )  # fmt: skip
    strategy = forms.ChoiceField(
        label=_("Strategy"),
        choices=[("ddp", "DDP"), ("fsdp", "FSDP"), ("zero2", "ZeRO-2"), ("zero3", "ZeRO-3")],
        initial="ddp",
    )
    offload = forms.ChoiceField(
        label=_("Offload to CPU"),
        choices=[
            ("none", _("none")),
            ("optimizer", _("optimizer state")),
            ("optimizer_and_params", _("optimizer state and parameters")),
        ],
        initial="none",
    )
    micro_batch = forms.IntegerField(label=_("Micro-batch"), initial=1, min_value=1)
    sequence_length = forms.IntegerField(label=_("Sequence length"), initial=2048, min_value=1)
    activation_checkpointing = forms.ChoiceField(
        label=_("Activation checkpointing"),
        choices=[("none", _("none")), ("selective", _("selective")), ("full", _("full"))],
        initial="none",
    )
    lora_rank = forms.IntegerField(label=_("LoRA rank"), initial=16, min_value=1)

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        if data["workload"] == "diffusion":
            request = {
                "workload": "diffusion",
                "pipeline": {"preset": data["pipeline"]},
                "diffusion": {
                    "mode": data["diffusion_mode"], "height": data["height"],
                    "width": data["width"], "batch": data["batch"],
                    "denoiser_dtype": data["denoiser_dtype"],
                    "text_encoder_dtype": data["text_encoder_dtype"],
                    "offload": data["diffusion_offload"], "attention": data["attention"],
                    "vae_tiling": bool(data.get("vae_tiling")),
                    "vae_slicing": bool(data.get("vae_slicing")),
                    "lora_rank": data["diffusion_lora_rank"],
                },
            }  # fmt: skip
            return self._checked(data, request)
        if data.get("config"):
            try:
                model = {"config": json.loads(data["config"])}
            except ValueError:
                self.add_error("config", _("This is not valid JSON."))
                return data
        elif data.get("parameters"):
            model = {"parameters": data["parameters"], "has_vae": data.get("has_vae", False)}
        elif data.get("preset"):
            model = {"preset": data["preset"]}
        else:
            raise forms.ValidationError(_("Choose a model, paste a config.json or give a count."))
        request = {
            "model": model,
            "workload": data["workload"],
            "weights_dtype": data["weights_dtype"],
            "inference": {k: data[k] for k in ("context_tokens", "concurrent_sequences",
                                               "kv_cache_dtype", "memory_utilization")},
            "training": {k: data[k] for k in ("method", "optimizer", "precision", "strategy",
                                              "offload", "micro_batch", "sequence_length",
                                              "activation_checkpointing", "lora_rank")},
        }  # fmt: skip
        return self._checked(data, request)

    FORM_FIELD = {"mode": "diffusion_mode", "offload": "diffusion_offload",
                  "lora_rank": "diffusion_lora_rank"}  # fmt: skip

    def _checked(self, data, request):
        """The API's serializer decides; its field errors go beside the page's fields."""
        checked = SizingInSerializer(data=request)
        if not checked.is_valid():
            for field, errors in checked.errors.items():
                if field == "diffusion" and isinstance(errors, dict):
                    for name, messages in errors.items():
                        name = self.FORM_FIELD.get(name, name)
                        self.add_error(name if name in self.fields else None, _flatten(messages))
                else:
                    self.add_error(None, f"{field}: {_flatten(errors)}")
            return data
        data["request"] = checked.validated_data
        return data


def _flatten(errors) -> str:
    if isinstance(errors, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in errors.items())
    if isinstance(errors, list):
        return " ".join(_flatten(e) for e in errors)
    return str(errors)
