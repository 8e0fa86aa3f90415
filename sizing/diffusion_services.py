"""Will a diffusion pipeline fit? The phases' memory against every catalog GPU: one GPU per
replica, or where none holds it, whole components over the GPUs of one node (diffusers'
`device_map="balanced"`), with the phase that sets the peak, what would lower it, and the
cheapest fitting complete quote."""

from dataclasses import replace
from typing import Any

from django.db.models import Max, Q
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _

from catalog.models import GpuModel, NodeState
from glossary.content import disclaimer
from sizing.components import ComponentError
from sizing.diffusion import (
    GIB,
    PRESETS,
    DiffusionWorkload,
    Phase,
    Pipeline,
    balanced,
    component_weights,
    decode_activations,
    phases,
    pipeline_from_configs,
    preset_pipeline,
    tiling,
    vae_bytes_per_value,
)
from sizing.estimator import DEFAULT_OVERHEAD, Overhead
from sizing.services import (
    CAVEATS,
    GPU_COUNTS,
    MIB,
    _partitions,
    _per_node,
    _sm,
    cheapest_quote,
    device_memory,
)

PHASE_NAMES = {
    "text_encoders": gettext_lazy("Text encoding"),
    "denoise": gettext_lazy("Denoising"),
    "refine": gettext_lazy("Refining"),
    "decode": gettext_lazy("VAE decode"),
    "safety_check": gettext_lazy("Safety check"),
    "train_step": gettext_lazy("Training step"),
}
# code → (title, words, glossary term)
DIFFUSION_CAVEATS = {
    "vae_tiling_quality": (gettext_lazy("Tiling changes the output"), gettext_lazy("VAE tiling and slicing decode in pieces: seams and colour shifts can appear, so check the images it makes before relying on it."), "vae"),
    "quantization_quality": (gettext_lazy("Quantization changes the output"), gettext_lazy("Quantized weights (FP8, INT8, NF4) change what the model draws: compare its images with the 16-bit model's before relying on it."), "quantization"),
    "vae_upcast": (gettext_lazy("SDXL decodes in FP32"), gettext_lazy("With FP16 weights, diffusers runs the SDXL VAE in FP32 (force_upcast), which doubles the decode's memory; a BF16 pipeline or the FP16-fixed VAE avoids it."), "vae"),
    "tiling_inactive": (gettext_lazy("Tiling does nothing at this size"), gettext_lazy("diffusers tiles the decode only when the image is larger than one tile (the VAE's sample size): at this resolution tiling changes nothing."), "vae"),
    "balanced_components": (gettext_lazy("Whole components per GPU"), gettext_lazy("Over several GPUs, each component stays whole on one GPU (device_map=\"balanced\"): the denoiser itself is never split, and the GPUs do not pool their memory."), "vram"),
    "offload_slower": (gettext_lazy("Offloading is slower"), gettext_lazy("CPU offload moves weights over PCIe at every phase (sequential offload at every layer): memory falls, time per image grows."), "vram"),
}  # fmt: skip


def pipeline_from_request(data: dict[str, Any]) -> Pipeline:
    """A preset, or a pasted pipeline (model_index.json and its components' configs)."""
    if "preset" in data:
        return preset_pipeline(data["preset"])
    return pipeline_from_configs(
        data["model_index"], data.get("components") or {},
        name=str(data["model_index"].get("_name_or_path") or ""),
    )  # fmt: skip


def component_error_words(exc: ComponentError) -> tuple[list[str], str]:
    """(the field's path, a message in the reader's language) for a refused config."""
    field = exc.fields[0] if exc.fields else ""
    path = field.split(".")
    if path[0] not in ("model_index", "components"):
        path = ["components", *path]
    name = path[-1]
    words = {
        "missing": _("The config lacks %(field)s."),
        "positive": _("%(field)s must be a positive whole number."),
        "positive_list": _("%(field)s must be a list of positive whole numbers."),
        "per_block": _("%(field)s needs one value per block (%(blocks)s)."),
        "unknown_value": _("Unknown %(field)s: %(value)s."),
        "unknown_pipeline": _("Unknown pipeline %(value)s: we size %(known)s."),
        "unknown_component": _("Unknown component %(field)s: %(value)s. We count %(known)s."),
        "missing_config": _("The config of %(field)s is missing."),
        "pair": _("%(field)s must be [library, class]."),
        "denoiser_and_vae": _("A pipeline needs exactly one unet or transformer and one vae."),
        "object": _("This must be a JSON object."),
    }
    template = words.get(exc.kind, "%(field)s: " + str(exc))
    params = {"field": name, "value": "", "known": "", "blocks": "", **exc.params}
    return path, template % {k: str(v) for k, v in params.items()}


def _caveat(code: str) -> dict[str, Any]:
    title, text, term = DIFFUSION_CAVEATS.get(code) or CAVEATS[code]
    return {"code": code, "title": str(title), "text": str(text), "glossary": term}


def _gpu_caveats(gpu: GpuModel, workload: DiffusionWorkload, count: int) -> list[str]:
    codes = []
    dtypes = {workload.denoiser_dtype, workload.text_encoder_dtype}
    if "fp8" in dtypes and gpu.vendor == "nvidia" and _sm(gpu) < (8, 9):
        codes.append("fp8_needs_sm89")
    if "fp8" in dtypes and gpu.vendor == "amd":
        codes.append("fp8_fnuz")
    if dtypes & {"int8", "nf4"} and gpu.vendor == "amd":
        codes.append("quantized_kernel")
    if gpu.stack == "rocm":
        codes.append("rocm_gfx_target")
    if _partitions(gpu):
        codes.append("mig_slices")
    if count > 1:
        codes.append("balanced_components")
    return codes


def _advice(pipeline: Pipeline, workload: DiffusionWorkload, peak: Phase) -> list[dict[str, Any]]:
    """What would lower the peak, with the figure it would come to."""
    out: list[dict[str, Any]] = []
    if workload.mode != "inference":
        return out
    if peak.name == "decode" and not workload.vae_tiling and tiling(pipeline, workload).active:
        tiled = peak.resident_bytes + decode_activations(pipeline, workload, tiled=True)
        out.append({"code": "enable_vae_tiling", "bytes": tiled,
                    "text": _("enable VAE tiling to bring it under %(gib)s GiB")
                    % {"gib": _gib_up(tiled)}})  # fmt: skip
    if workload.offload == "none":
        offloaded = max(p.total_bytes for p in phases(pipeline, replace(workload, offload="model")))
        out.append({"code": "enable_model_cpu_offload", "bytes": offloaded,
                    "text": _("model CPU offload brings the peak to %(gib)s GiB (slower)")
                    % {"gib": _gib_up(offloaded)}})  # fmt: skip
    return out


def _gib_up(n: int) -> str:
    """GiB rounded up to a tenth: "under X GiB" stays true."""
    tenths = -(-n * 10 // GIB)
    return f"{tenths // 10}.{tenths % 10}"


def _gib(n: int) -> str:
    return f"{n / GIB:.1f}"


def size_diffusion(
    *, pipeline: Pipeline, workload: DiffusionWorkload, gpu_model: str | None = None,
    gpu_count: int | None = None, overhead: Overhead = DEFAULT_OVERHEAD,
) -> dict[str, Any]:  # fmt: skip
    """The answer the page and the API show for a diffusion workload."""
    every = phases(pipeline, workload)
    peak = max(every, key=lambda p: p.total_bytes)
    gpus = GpuModel.objects.filter(is_active=True).annotate(
        per_node=Max("nodes__gpus__index", filter=Q(nodes__state=NodeState.ACTIVE))
    )
    if gpu_model:
        gpus = gpus.filter(slug=gpu_model)
    memory = device_memory()
    may_split = workload.mode == "inference" and workload.offload == "none"
    candidates, seen = [], []
    for gpu in gpus.order_by("name"):
        device_bytes, measured = memory.get(gpu.pk, (gpu.memory_reported_mib * MIB, False))
        usable = int(device_bytes * workload.memory_utilization)
        if gpu_count:
            counts = [gpu_count]
        else:
            counts = [c for c in GPU_COUNTS if c <= _per_node(gpu) and (c == 1 or may_split)]
        for count in counts:
            if count == 1 or not may_split:
                weights = peak.resident_bytes - peak.gradients_bytes - peak.optimizer_bytes
                parts = (weights, peak.gradients_bytes, peak.optimizer_bytes,
                         peak.activations_bytes)  # fmt: skip
                held = [[c.name for c in pipeline.components]]
            else:
                placement = balanced(pipeline, workload, count)
                i = placement.busiest
                parts = (placement.weights_bytes[i], 0, 0, placement.activations_bytes[i])
                held = placement.components
            need = sum(parts)
            extra = overhead.context_bytes + round(need * overhead.fragmentation)
            total = need + extra
            codes = _gpu_caveats(gpu, workload, count)
            seen += [c for c in codes if c not in seen]
            candidates.append({
                "gpu_model": gpu.slug, "gpu_name": gpu.name, "gpu_count": count,
                "parallelism": "single" if count == 1 else "balanced",
                "per_gpu": {
                    "weights_bytes": parts[0], "kv_cache_bytes": 0, "gradients_bytes": parts[1],
                    "optimizer_bytes": parts[2], "model_states_bytes": sum(parts[:3]),
                    "activations_bytes": parts[3], "overhead_bytes": extra, "total_bytes": total,
                },
                "device_bytes": device_bytes, "device_measured": measured,
                "usable_bytes_per_gpu": usable, "fits": total <= usable,
                "headroom_bytes": usable - total, "max_concurrent_sequences": None,
                "components_per_gpu": held, "caveats": codes,
            })  # fmt: skip
    general = []
    if workload.vae_tiling or workload.vae_slicing:
        general.append("vae_tiling_quality")
    if workload.vae_tiling and not tiling(pipeline, workload).active:
        general.append("tiling_inactive")
    if {workload.denoiser_dtype, workload.text_encoder_dtype} & {"fp8", "int8", "nf4"}:
        general.append("quantization_quality")
    if vae_bytes_per_value(pipeline, workload) == 4 and workload.denoiser_dtype == "fp16":
        general.append("vae_upcast")
    if workload.offload != "none":
        general.append("offload_slower")
    codes = [*general, *(c for c in seen if c not in general)]
    advice = _advice(pipeline, workload, peak)
    return {
        "workload": "diffusion",
        "pipeline_name": pipeline.name,
        "parameters": pipeline.parameters,
        "components": [
            {
                "name": c.name,
                "class_name": c.class_name,
                "role": c.role,
                "parameters": c.parameters,
                "weights_bytes": component_weights(pipeline, c, workload),
            }
            for c in pipeline.components
        ],  # fmt: skip
        "phases": [
            {
                "phase": p.name,
                "title": str(PHASE_NAMES[p.name]),
                "components": p.components,
                "resident_bytes": p.resident_bytes,
                "activations_bytes": p.activations_bytes,
                "total_bytes": p.total_bytes,
            }
            for p in every
        ],  # fmt: skip
        "peak": {
            "phase": peak.name,
            "bytes": peak.total_bytes,
            "text": _("%(phase)s at %(width)s × %(height)s needs %(gib)s GiB")
            % {
                "phase": PHASE_NAMES[peak.name],
                "width": workload.width,
                "height": workload.height,
                "gib": _gib(peak.total_bytes),
            },
        },  # fmt: skip
        "advice": advice,
        "candidates": candidates,
        "caveats": [_caveat(c) for c in codes],
        "cheapest_quote": cheapest_quote(candidates),
        "disclaimer": disclaimer(get_language() or "en"),
    }


__all__ = ["PRESETS", "pipeline_from_request", "size_diffusion", "component_error_words"]
