"""The sizing assistant against our catalog: every GPU model at 1, 2, 4 and 8 GPUs on one
node, sized against the memory the fleet's devices report, with the caveats that apply."""

import re
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Max, Q
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _

from catalog.models import GpuModel, GpuPrice, NodeState
from catalog.selectors import current_gpu_prices
from core.money import Money
from core.vat import TaxTreatment, rate_for, vat_split
from glossary.content import disclaimer
from sizing.estimator import (
    DEFAULT_OVERHEAD,
    QUANTIZED,
    Architecture,
    Estimate,
    Inference,
    Overhead,
    Training,
    architecture_from_config,
    estimate_inference,
    estimate_training,
    kv_cache_dtype_bytes,
    weights_bytes,
)
from sizing.presets import PRESETS
from telemetry.selectors import memory_total_by_model

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

MIB = 2**20
GPU_COUNTS = (1, 2, 4, 8)
MEASURED_WITHIN = timedelta(days=30)

# code → (title, words, glossary term)
CAVEATS = {
    "ddp_not_pooled": (gettext_lazy("DDP does not pool memory"), gettext_lazy("DDP keeps a whole copy of the model on every GPU: memory is not pooled. Only FSDP/ZeRO-3 or tensor parallelism split the weights."), "ddp"),
    "tp_heads_indivisible": (gettext_lazy("Heads do not divide"), gettext_lazy("Tensor parallelism needs the attention heads divisible by its degree: this split is not possible."), "tensor-parallelism"),
    "tp_without_fast_link": (gettext_lazy("Tensor parallelism over PCIe"), gettext_lazy("This card has no NVLink or Infinity Fabric: tensor parallelism over PCIe is slow (two all-reduces per layer)."), "tensor-parallelism"),
    "kv_heads_replicated": (gettext_lazy("KV heads replicated"), gettext_lazy("More GPUs than KV heads: the KV heads are replicated, so the KV cache does not shrink further."), "kv-cache"),
    "moe_experts_resident": (gettext_lazy("Every expert in memory"), gettext_lazy("Mixture of experts: every expert stays in memory, although each token uses only a few."), "vram"),
    "fp8_needs_sm89": (gettext_lazy("FP8 runs weight-only here"), gettext_lazy("FP8 W8A8 needs compute capability 8.9 or newer (or an MI300); here FP8 checkpoints run as weight-only W8A16."), "quantization"),
    "fp8_fnuz": (gettext_lazy("FP8 is FNUZ on MI300X"), gettext_lazy("MI300X FP8 is the FNUZ variant: OCP FP8 checkpoints need converting."), "quantization"),
    "quantized_kernel": (gettext_lazy("Quantized kernels"), gettext_lazy("A quantized format fits only if a kernel exists for this GPU and the checkpoint carries its metadata; AWQ, GPTQ and bitsandbytes coverage lags on ROCm."), "quantization"),
    "rocm_gfx_target": (gettext_lazy("ROCm gfx target"), gettext_lazy("ROCm: your wheels must include this GPU's gfx target."), "rocm"),
    "parameters_only": (gettext_lazy("Weights only"), gettext_lazy("Only a parameter count was given: weights and model states are sized, the KV cache and activations are not."), "vram"),
    "mig_slices": (gettext_lazy("MIG slices are smaller"), gettext_lazy("Run in a MIG slice (or an MI300X compute partition), a job gets the slice's memory, not the card's: size it against the slice."), "vram"),
    "vae_decode_peak": (gettext_lazy("VAE decode peak"), gettext_lazy("Diffusion pipelines: a VAE decode can peak on its own, above the denoiser's use."), "vae"),
}  # fmt: skip


@dataclass
class Model:
    name: str
    arch: Architecture | None
    parameters: int
    active_parameters: int
    largest_layer: int | None
    has_vae: bool = False  # a diffusion pipeline's (only a parameter count can say so)


def model_from_request(data: dict[str, Any]) -> Model:
    """A preset, a pasted config.json, or a bare parameter count (validated upstream)."""
    if "preset" in data:
        preset = PRESETS[data["preset"]]
        arch = architecture_from_config(preset["config"])
        name = preset["name"]
    elif "config" in data:
        arch = architecture_from_config(data["config"])
        name = data["config"].get("_name_or_path") or data["config"].get("model_type", "")
    else:
        count = data["parameters"]
        return Model(_("%(n)s parameters") % {"n": f"{count:,}"}, None, count, count,
                     data.get("largest_layer_parameters"),
                     has_vae=bool(data.get("has_vae")))  # fmt: skip
    return Model(
        str(name), arch, arch.parameters(), arch.parameters(active=True),
        arch.largest_layer_parameters(),
    )  # fmt: skip


def device_memory() -> dict[int, tuple[int, bool]]:
    """Per GPU model: (bytes per device, measured?). Measured is the largest total the
    fleet's exporters reported in the last 30 days; without it, the catalog's figure of
    what the driver reports (never the marketing number)."""
    since = timezone.now() - MEASURED_WITHIN
    measured = memory_total_by_model(since=since)
    memory = {}
    for model in GpuModel.objects.filter(is_active=True):
        mib = measured.get(model.pk)
        memory[model.pk] = (
            (int(mib * MIB), True) if mib else (model.memory_reported_mib * MIB, False)
        )
    return memory


def _gpu_caveats(
    gpu: GpuModel,
    *,
    count: int,
    model: Model,
    weights_dtype: str,
    workload: str,
    training: Training | None,
) -> list[str]:
    codes = []
    arch = model.arch
    tp = workload == "inference" and count > 1
    if tp and arch and arch.heads % count:
        codes.append("tp_heads_indivisible")
    if tp and gpu.interconnect.lower().startswith("none"):
        codes.append("tp_without_fast_link")
    if tp and arch and count > arch.kv_heads:
        codes.append("kv_heads_replicated")
    if workload == "training" and training is not None and training.strategy == "ddp" and count > 1:
        codes.append("ddp_not_pooled")
    if weights_dtype == "fp8" and gpu.vendor == "nvidia" and _sm(gpu) < (8, 9):
        codes.append("fp8_needs_sm89")
    if weights_dtype == "fp8" and gpu.vendor == "amd":
        codes.append("fp8_fnuz")
    if weights_dtype in QUANTIZED and weights_dtype != "fp8" and gpu.vendor == "amd":
        codes.append("quantized_kernel")
    if gpu.stack == "rocm":
        codes.append("rocm_gfx_target")
    if _partitions(gpu):
        codes.append("mig_slices")
    return codes


def _sm(gpu: GpuModel) -> tuple[int, ...]:
    """An NVIDIA card's compute capability as numbers ("10.0" is after "8.9")."""
    return tuple(int(part) for part in re.findall(r"\d+", gpu.compute_target)[:2])


def _partitions(gpu: GpuModel) -> bool:
    """Cards that can be cut into slices with memory of their own: MIG on the data-centre
    NVIDIA generations (A100/A30, H100/H200, B200) and compute partitions on the MI300."""
    if gpu.vendor == "nvidia":
        return _sm(gpu)[:2] in {(8, 0), (9, 0), (10, 0)}
    return gpu.compute_target == "gfx942"


def size(
    *, model: Model, workload: str, weights_dtype: str, inference: Inference | None = None,
    training: Training | None = None, gpu_model: str | None = None, gpu_count: int | None = None,
    overhead: Overhead = DEFAULT_OVERHEAD,
) -> dict[str, Any]:  # fmt: skip
    """The answer the page and the API show: the model's sizes, every candidate and the
    caveats that apply."""
    inference, training = inference or Inference(), training or Training()
    gpus = GpuModel.objects.filter(is_active=True).annotate(
        per_node=Max("nodes__gpus__index", filter=Q(nodes__state=NodeState.ACTIVE))
    )
    if gpu_model:
        gpus = gpus.filter(slug=gpu_model)
    memory = device_memory()
    candidates = []
    seen_codes: list[str] = []
    for gpu in gpus.order_by("name"):
        counts = [gpu_count] if gpu_count else [c for c in GPU_COUNTS if c <= _per_node(gpu)]
        device_bytes, measured = memory.get(gpu.pk, (gpu.memory_reported_mib * MIB, False))
        for count in counts:
            estimate = _estimate(
                model, workload, weights_dtype, inference, training, count, device_bytes, overhead
            )
            codes = _gpu_caveats(
                gpu, count=count, model=model, weights_dtype=weights_dtype, workload=workload,
                training=training,
            )  # fmt: skip
            possible = "tp_heads_indivisible" not in codes
            candidates.append({
                "gpu_model": gpu.slug, "gpu_name": gpu.name, "gpu_count": count,
                "parallelism": estimate.parallelism, "per_gpu": estimate.per_gpu.as_dict(),
                "device_bytes": device_bytes, "device_measured": measured,
                "usable_bytes_per_gpu": estimate.usable_bytes,
                "fits": estimate.fits and possible, "headroom_bytes": estimate.headroom_bytes,
                "max_concurrent_sequences": estimate.max_concurrent_sequences,
                "caveats": codes,
            })  # fmt: skip
            seen_codes += [c for c in codes if c not in seen_codes]
    general = []
    if model.arch is None:
        general.append("parameters_only")
    if model.arch and model.arch.experts > 1:
        general.append("moe_experts_resident")
    if workload == "training" and training.strategy == "ddp":
        general.append("ddp_not_pooled")
    if model.has_vae:  # a diffusion pipeline: its VAE decode peaks on its own
        general.append("vae_decode_peak")
    codes = [*general, *(c for c in seen_codes if c not in general)]
    kv_per_token = None
    if model.arch and workload == "inference":
        kv_bytes = kv_cache_dtype_bytes(inference.kv_cache_dtype, weights_dtype)
        kv_per_token = model.arch.kv_bytes_per_token(kv_bytes)
    return {
        "model_name": model.name,
        "parameters": model.parameters,
        "active_parameters": model.active_parameters,
        "weights_bytes": weights_bytes(model.arch, model.parameters, weights_dtype),
        "kv_cache_bytes_per_token": kv_per_token,
        "candidates": candidates,
        "cheapest_quote": cheapest_quote(candidates),
        "caveats": [
            {
                "code": c,
                "title": str(CAVEATS[c][0]),
                "text": str(CAVEATS[c][1]),
                "glossary": CAVEATS[c][2],
            }
            for c in codes
        ],
        "disclaimer": disclaimer(get_language() or "en"),
    }


class PerNode(TypedDict):
    per_node: int | None  # the highest GPU index on an active node of the model


def _per_node(gpu: "WithAnnotations[GpuModel, PerNode]") -> int:
    return (gpu.per_node + 1) if gpu.per_node is not None else max(GPU_COUNTS)


def _estimate(
    model: Model,
    workload: str,
    weights_dtype: str,
    inference: Inference | None,
    training: Training | None,
    count: int,
    device_bytes: int,
    overhead: Overhead,
) -> Estimate:
    if workload == "inference":
        assert inference is not None, "an inference workload comes with its Inference"
        return estimate_inference(
            arch=model.arch, parameters=model.parameters, weights_dtype=weights_dtype,
            gpus=count, device_bytes=device_bytes, workload=inference, overhead=overhead,
        )  # fmt: skip
    assert training is not None, "a training workload comes with its Training"
    return estimate_training(
        arch=model.arch, parameters=model.parameters, largest_layer=model.largest_layer,
        weights_dtype=weights_dtype, gpus=count, device_bytes=device_bytes, workload=training,
        overhead=overhead,
    )  # fmt: skip


def rental_price(
    gpu_model: str, gpu_count: int, *, prices: dict[str, GpuPrice]
) -> dict[str, Any] | None:
    """What renting `gpu_count` GPUs of a model costs for its shortest period, net, at the
    prices in force (`prices`: from `prices_now()`): anyone may read it, signed in or not."""
    row = prices.get(gpu_model)
    if row is None:
        return None
    total = Money(row.unit_price, row.currency) * gpu_count
    return {"period": row.period, "unit_price": row.unit_price, "total": total.amount,
            "currency": row.currency}  # fmt: skip


def prices_now() -> dict[str, GpuPrice]:
    """Per GPU model slug, the price row in force for its shortest active period."""
    shortest: dict[str, GpuPrice] = {}
    for row in current_gpu_prices().select_related("gpu_model"):
        best = shortest.get(row.gpu_model.slug)
        if best is None or row.period.duration < best.period.duration:
            shortest[row.gpu_model.slug] = row
    return shortest


def smallest_fits(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per GPU model, the smallest configuration that fits (or the largest tried, marked
    as not fitting), in catalog order, with the smaller counts that did not fit."""
    by_model: dict[str, dict[str, Any]] = {}
    for c in candidates:
        best = by_model.get(c["gpu_model"])
        if best is None or (not best["fits"] and (c["fits"] or c["gpu_count"] > best["gpu_count"])):
            by_model[c["gpu_model"]] = c
    return [
        {**best, "too_small": [
            c for c in candidates
            if c["gpu_model"] == slug and c["gpu_count"] < best["gpu_count"] and not c["fits"]
        ]}
        for slug, best in by_model.items()
    ]  # fmt: skip


def cheapest_quote(
    candidates: list[dict[str, Any]], *, prices: dict[str, GpuPrice] | None = None
) -> dict[str, Any] | None:
    """Of the smallest fitting configuration of each GPU model, the cheapest per hour of its
    model's shortest period, as the complete quote a consumer would get for one such
    period with no options: the GPU line (model × GPUs × 1 period × unit price), VAT at the
    consumer's rate on the net total (core.vat, as quotes add it) and the gross. Prices in
    another currency than the cheapest's are not compared with it. None when nothing fits
    or nothing that fits has a price."""
    prices = prices_now() if prices is None else prices
    best = None
    for c in smallest_fits(candidates):
        row = prices.get(c["gpu_model"])
        if not c["fits"] or row is None:
            continue
        hourly = (
            row.unit_price * c["gpu_count"] / Decimal(row.period.duration.total_seconds() / 3600)
        )
        key = (row.currency, hourly, c["gpu_count"])
        if best is None or (key[0] == best[0][0] and key[1:] < best[0][1:]):
            best = (key, c, row)
    if best is None:
        return None
    _key, c, row = best
    net = (Money(row.unit_price, row.currency) * c["gpu_count"]).amount
    rate = rate_for(TaxTreatment.CONSUMER)
    _shares, vat = vat_split([net], rate, row.currency)
    return {
        "gpu_model": c["gpu_model"], "gpu_name": c["gpu_name"], "gpu_count": c["gpu_count"],
        "period": row.period.slug, "period_name": str(row.period.name), "period_count": 1,
        "lines": [{"kind": "gpu", "quantity": c["gpu_count"], "unit_price": row.unit_price,
                   "amount": net}],
        "net_total": net, "tax_treatment": TaxTreatment.CONSUMER.value, "vat_rate": rate,
        "vat_total": vat, "total": net + vat, "currency": row.currency,
        "book_path": reverse("book", args=[c["gpu_model"]])
        + f"?gpu_count={c['gpu_count']}&period={row.period.slug}&period_count=1",
    }  # fmt: skip
