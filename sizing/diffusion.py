"""How much GPU memory a diffusion pipeline needs, phase by phase, in bytes.

Plain Python with no Django, like the estimator. A pipeline is read from diffusers'
`model_index.json` and each component's config (the presets ship theirs under
`sizing/pipelines/`), counted by `sizing.components`. Its memory is sized per phase: the
text encoders, the denoiser's step, the VAE's decode (which grows with the output's pixels
and sets the peak of large images), and for fine-tuning the denoiser's training step. What
is resident in each phase depends on the offload mode; the peak is the largest phase, not
the sum. docs/sizing.md gives each formula with its source.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from sizing.components import COUNTERS, WEIGHTLESS, Component, ComponentError

GIB = 2**30
PIPELINES = Path(__file__).parent / "pipelines"
DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "nf4")
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # QLoRA's NF4 with double quantization (sizing.md §1.5)
FLOAT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}

# Live tensors at the peak of one step, in units of (tokens × width) of the compute dtype.
# Inference runs without autograd, so only a block's own temporaries are alive: the two
# residual streams, their modulated norms, q/k/v and the attention output, and the
# feed-forward's 4× hidden before and after its GELU.
TRANSFORMER_LIVE = 18
# A UNet level: a transformer block's GEGLU (8c projection, 4c gate, 4c product) …
UNET_TRANSFORMER_LIVE = 16
# … and a resnet's input, normalised and activated copies.
UNET_RESNET_LIVE = 4
# Training keeps every block's activations for the backward pass: per token and width, the
# 34 of Korthikanti et al. (sizing.md §1.4) for a transformer block, and for a resnet the
# inputs of its norms, activations and convolutions.
TRAIN_TRANSFORMER_SAVED = 34
TRAIN_RESNET_SAVED = 8
# The VAE decoder's peak per output pixel, in values of its dtype: 8.5 × the widest channel
# count at a scale, per pixel of that scale (8.5 × 256 = 2,176 at full resolution for the
# SD/SDXL/SD3/FLUX VAEs, whose widest full-resolution tensors have 256 channels,
# diffusion.md §2). Three such tensors are alive at once in a resnet (its input, the
# GroupNorm's and the SiLU's outputs); the rest is cuDNN's convolution workspace and the
# caching allocator's blocks. The factor is calibrated, not derived: on diffusers'
# published decode figures (SD 1.5 in FP16 and SDXL in FP32 at 512² and 1024², RTX 4090)
# one factor fits all four within 8 %, and FLUX's BF16 peak on an H100 within 2 %
# (docs/sizing.md has the table).
DECODER_LIVE = 8.5

PIPELINE_DEFAULTS = {
    # class → (classifier-free guidance by default, text tokens the denoiser attends to)
    "StableDiffusionPipeline": (True, 77),
    "StableDiffusionXLPipeline": (True, 77),
    "StableDiffusionXLImg2ImgPipeline": (True, 77),
    "StableDiffusion3Pipeline": (True, 77 + 256),  # CLIP's 77 and T5's default 256
    "FluxPipeline": (False, 512),  # guidance-distilled; T5 max_sequence_length 512
}
# These pipelines run an fp16 VAE in fp32 when its config says force_upcast (diffusion.md §2).
UPCASTS_VAE = {"StableDiffusionXLPipeline", "StableDiffusionXLImg2ImgPipeline"}


@dataclass(frozen=True)
class Pipeline:
    name: str
    class_name: str
    components: tuple[Component, ...]
    text_tokens: int
    guidance: bool

    @property
    def denoisers(self) -> list[Component]:
        return [c for c in self.components if c.role == "denoiser"]

    @property
    def vae(self) -> Component:
        return next(c for c in self.components if c.role == "vae")

    @property
    def factor(self) -> int:
        return self.vae.shape["factor"]

    @property
    def parameters(self) -> int:
        return sum(c.parameters for c in self.components)


def pipeline_from_configs(model_index: dict, configs: dict, *, name: str = "") -> Pipeline:
    """A pipeline from its `model_index.json` and each component's config (by component
    name). Refuses, naming the field, a component class we cannot count, a component with
    no config, and a pipeline without a denoiser and a VAE."""
    if not isinstance(model_index, dict):
        raise ComponentError("model_index.json must be a JSON object", ["model_index"], "object")
    if not isinstance(configs, dict):
        raise ComponentError(
            "components must map each name to its config", ["components"], "object"
        )
    class_name = model_index.get("_class_name")
    if class_name not in PIPELINE_DEFAULTS:
        raise ComponentError(
            f"unknown pipeline {class_name!r}: one of " + ", ".join(sorted(PIPELINE_DEFAULTS)),
            ["model_index._class_name"],
            "unknown_pipeline",
            value=class_name,
            known=", ".join(sorted(PIPELINE_DEFAULTS)),
        )
    components = []
    for key, value in model_index.items():
        if key.startswith("_") or not isinstance(value, list):
            continue
        if len(value) != 2:
            raise ComponentError(f"model_index.json: {key} must be [library, class]",
                                 [f"model_index.{key}"], "pair")  # fmt: skip
        library, cls = value
        if cls is None or cls in WEIGHTLESS:
            continue
        if cls not in COUNTERS:
            raise ComponentError(
                f"unknown component {key}: {cls!r} (we count " + ", ".join(sorted(COUNTERS)) + ")",
                [f"model_index.{key}"],
                "unknown_component",
                value=cls,
                known=", ".join(sorted(COUNTERS)),
            )
        config = configs.get(key)
        if not isinstance(config, dict):
            raise ComponentError(
                f"{key}/config.json is missing", [f"components.{key}"], "missing_config"
            )
        components.append(COUNTERS[cls](config, key))
    roles = [c.role for c in components]
    if roles.count("denoiser") != 1 or roles.count("vae") != 1:
        raise ComponentError(
            "a pipeline needs exactly one unet or transformer and one vae",
            ["model_index.unet" if "denoiser" not in roles else "model_index.vae"],
            "denoiser_and_vae",
        )
    guidance, tokens = PIPELINE_DEFAULTS[class_name]
    return Pipeline(name or class_name, class_name, tuple(components), tokens, guidance)


def _read_folder(folder: Path) -> tuple[dict, dict]:
    model_index = json.loads((folder / "model_index.json").read_text())
    configs = {
        sub.name: json.loads((sub / "config.json").read_text())
        for sub in folder.iterdir()
        if (sub / "config.json").is_file()
    }
    return model_index, configs


@dataclass(frozen=True)
class Preset:
    name: str
    folder: str
    refiner: str | None = None  # a second pipeline whose unet refines the base's latents
    published: dict = field(default_factory=dict)  # component → (count, what it is, source)


# Published counts (docs/sizing.md, with their sources): the test holds every counted
# component within 2 % of them. SD 3.5 Medium's sources disagree (2.5B, 2.47B, "2.0B"): we
# follow 2.47B, the GGUF file's count of its tensors, which includes the 384² × 1536
# positional table that diffusers keeps as a persistent buffer (226.5M): our count of
# parameters plus that buffer is 2.4697B; 2.5B is the same figure rounded; "2.0B" matches
# neither (SD3 Medium's 2.0B, most likely).
CLIP_L = (123_000_000, "CLIP ViT-L/14 text, 123M", "S20")
CLIP_G = (695_000_000, "OpenCLIP bigG text: fp16 file 1.39 GB → ≈695M", "S26f")
T5_XXL = (4_760_000_000, "T5 v1.1 XXL encoder: 9.52 GB in BF16 → ≈4.76B", "S5")
VAE = (83_600_000, "SDXL VAE: fp32 file 335 MB → ≈83.6M", "S26a")
VAE16 = (84_000_000, "SD3.5 / FLUX VAE: 168 MB in BF16 → ≈84M", "S5, S26g")
PRESETS = {
    "sd15": Preset("Stable Diffusion 1.5", "sd15", published={
        "unet": (860_000_000, "860M UNet", "S20"), "text_encoder": CLIP_L, "vae": VAE,
        "safety_checker": (304_000_000, "safety_checker fp32 file 1.22 GB → ≈304M "
                           "(the file listing; not in the reference)", "listing"),
    }),
    "sdxl": Preset("SDXL 1.0 base", "sdxl-base", published={
        "unet": (2_567_460_000, "2,567.46M (diffusers benchmarks)", "S14"),
        "text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "vae": VAE,
    }),
    "sdxl-refiner": Preset("SDXL 1.0 base + refiner", "sdxl-base", refiner="sdxl-refiner",
                           published={
        "unet": (2_567_460_000, "2,567.46M (diffusers benchmarks)", "S14"),
        "refiner_unet": (2_260_000_000, "refiner fp16 file 4.52 GB → ≈2.26B", "S26a"),
        "text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "vae": VAE,
    }),
    "sd35-medium": Preset("Stable Diffusion 3.5 Medium", "sd35-medium", published={
        "transformer": (2_470_000_000, "2.47B (GGUF tensors, positional table included)",
                        "S30b"),
        "text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "text_encoder_3": T5_XXL,
        "vae": VAE16,
    }),
    "sd35-large": Preset("Stable Diffusion 3.5 Large", "sd35-large", published={
        "transformer": (8_100_000_000, "8.1B", "S31"),
        "text_encoder": CLIP_L, "text_encoder_2": CLIP_G, "text_encoder_3": T5_XXL,
        "vae": VAE16,
    }),
    "flux-dev": Preset("FLUX.1 [dev]", "flux-dev", published={
        "transformer": (11_901_410_000, "11,901.41M (diffusers benchmarks)", "S14"),
        "text_encoder": CLIP_L, "text_encoder_2": T5_XXL, "vae": VAE16,
    }),
    "flux-schnell": Preset("FLUX.1 [schnell]", "flux-schnell", published={
        "transformer": (12_000_000_000, "12 billion", "S25"),
        "text_encoder": CLIP_L, "text_encoder_2": T5_XXL, "vae": VAE16,
    }),
}  # fmt: skip


def preset_pipeline(slug: str) -> Pipeline:
    """A preset built from the configs it ships with. With a refiner, the refiner's unet
    joins the base pipeline and shares its text_encoder_2 and VAE, as diffusers' SDXL guide
    loads them."""
    preset = PRESETS[slug]
    base = pipeline_from_configs(*_read_folder(PIPELINES / preset.folder), name=preset.name)
    if not preset.refiner:
        return base
    refiner = pipeline_from_configs(*_read_folder(PIPELINES / preset.refiner))
    unet = next(c for c in refiner.denoisers)
    unet = Component(**{**unet.__dict__, "name": "refiner_unet"})
    return Pipeline(base.name, base.class_name, (*base.components, unet), base.text_tokens,
                    base.guidance)  # fmt: skip


# --- the workload ----------------------------------------------------------------------


@dataclass(frozen=True)
class DiffusionWorkload:
    mode: str = "inference"  # inference | lora | full
    height: int = 1024
    width: int = 1024
    batch: int = 1  # images per step (prompts × images per prompt)
    guidance: bool | None = None  # classifier-free guidance; None: the pipeline's default
    denoiser_dtype: str = "bf16"
    text_encoder_dtype: str = "bf16"
    attention: str = "efficient"  # efficient (SDPA flash / memory-efficient) | naive
    vae_tiling: bool = False
    vae_tile: int | None = None  # pixels; None: the VAE's sample_size, diffusers' default
    vae_tile_overlap: float = 0.25
    vae_slicing: bool = False
    offload: str = "none"  # none | model | sequential
    gradient_checkpointing: bool = True
    optimizer: str = "adamw"  # adamw | adamw8bit
    cache_latents: bool = True
    cache_text_embeddings: bool = True
    lora_rank: int = 16
    memory_utilization: float = 0.95


def compute_dtype(workload: DiffusionWorkload) -> str:
    """What activations are held in: the denoiser's float format, or BF16 under a quantized
    one (the compute dtype of bitsandbytes, torchao and quanto layers)."""
    return workload.denoiser_dtype if workload.denoiser_dtype in FLOAT_BYTES else "bf16"


def vae_bytes_per_value(pipeline: Pipeline, workload: DiffusionWorkload) -> int:
    dtype = compute_dtype(workload)
    if (
        dtype == "fp16"
        and pipeline.class_name in UPCASTS_VAE
        and pipeline.vae.shape["force_upcast"]
    ):
        return 4
    return FLOAT_BYTES[dtype]


def weights_bytes(component: Component, dtype: str) -> int:
    """A component's weights (and saved buffers) at `dtype`: quantized formats compress the
    nn.Linear layers only; convolutions, norms, embeddings and buffers stay 16-bit."""
    if dtype in FLOAT_BYTES:
        return (component.parameters + component.buffers) * FLOAT_BYTES[dtype]
    rest = component.parameters - component.linear_parameters + component.buffers
    linear = component.linear_parameters
    quantized = linear if dtype in ("fp8", "int8") else math.ceil(linear * NF4_BITS / 8)
    return quantized + 2 * rest


def component_weights(pipeline: Pipeline, component: Component, w: DiffusionWorkload) -> int:
    if component.role == "denoiser":
        return weights_bytes(component, w.denoiser_dtype)
    if component.role == "text_encoder":
        return weights_bytes(component, w.text_encoder_dtype)
    if component.role == "vae":
        return (component.parameters + component.buffers) * vae_bytes_per_value(pipeline, w)
    return weights_bytes(component, compute_dtype(w))


# --- activations -----------------------------------------------------------------------


def latent_size(pipeline: Pipeline, height: int, width: int) -> tuple[int, int]:
    return height // pipeline.factor, width // pipeline.factor


def _attention_scores(heads: int, tokens: int, batch: int, b: int, naive: bool) -> int:
    """Scores and their softmax, materialised only without a memory-efficient kernel."""
    return 2 * batch * heads * tokens * tokens * b if naive else 0


def denoise_activations(pipeline: Pipeline, denoiser: Component, w: DiffusionWorkload) -> int:
    """The peak of one denoising step beyond the weights, inference (no autograd)."""
    b = FLOAT_BYTES[compute_dtype(w)]
    guidance = pipeline.guidance if w.guidance is None else w.guidance
    batch = w.batch * (2 if guidance else 1)
    h, wd = latent_size(pipeline, w.height, w.width)
    naive = w.attention == "naive"
    shape = denoiser.shape
    if shape["kind"] in ("mmdit", "flux"):
        p = shape["patch"]
        tokens = (h // p) * (wd // p) + pipeline.text_tokens
        live = batch * tokens * shape["dim"] * b * TRANSFORMER_LIVE
        return live + _attention_scores(shape["heads"], tokens, batch, b, naive)
    skip, peak = 0, 0
    for channels, down, heads, _depth in shape["levels"]:
        tokens = (h // down) * (wd // down)
        skip += 3 * channels * tokens  # the resnets' and downsampler's outputs kept for the up path
        level = (UNET_TRANSFORMER_LIVE if heads else UNET_RESNET_LIVE) * channels * tokens
        level = level * batch * b + (
            _attention_scores(heads, tokens, batch, b, naive) if heads else 0
        )
        peak = max(peak, level)
    return skip * batch * b + peak


def train_activations(pipeline: Pipeline, denoiser: Component, w: DiffusionWorkload) -> int:
    """Activations a training step keeps for its backward pass (no guidance doubling). With
    gradient checkpointing, each checkpointed block keeps only its input, and one block's
    activations live again while it is recomputed."""
    b = FLOAT_BYTES[compute_dtype(w)]
    h, wd = latent_size(pipeline, w.height, w.width)
    naive = w.attention == "naive"
    shape = denoiser.shape
    blocks = []  # (saved bytes of one block, its input's bytes), per block
    if shape["kind"] in ("mmdit", "flux"):
        p = shape["patch"]
        tokens = (h // p) * (wd // p) + pipeline.text_tokens
        one = w.batch * tokens * shape["dim"] * b
        saved = one * TRAIN_TRANSFORMER_SAVED + _attention_scores(
            shape["heads"], tokens, w.batch, b, naive
        )
        blocks = [(saved, one)] * shape["blocks"]
    else:
        for channels, down, heads, depth in shape["levels"]:
            tokens = (h // down) * (wd // down)
            one = w.batch * tokens * channels * b
            # down path: 2 resnets (and attentions); up path: 3 of each, at every level
            for _resnet in range(5):
                blocks.append((one * TRAIN_RESNET_SAVED, one))
                if heads:
                    saved = one * TRAIN_TRANSFORMER_SAVED * depth + depth * _attention_scores(
                        heads, tokens, w.batch, b, naive
                    )
                    blocks.append((saved, one))
    if w.gradient_checkpointing:
        return sum(inp for _saved, inp in blocks) + max(saved for saved, _inp in blocks)
    return sum(saved for saved, _inp in blocks)


def text_activations(pipeline: Pipeline, component: Component, w: DiffusionWorkload) -> int:
    b = FLOAT_BYTES[compute_dtype(w)]
    guidance = pipeline.guidance if w.guidance is None else w.guidance
    batch = w.batch * (2 if guidance else 1)
    s = component.shape
    tokens = min(s["tokens"], pipeline.text_tokens) if s["kind"] == "text" else s["tokens"]
    live = batch * tokens * (4 * s["hidden"] + s["intermediate"]) * b
    return live + _attention_scores(s.get("heads", 1), tokens, batch, b, w.attention == "naive")


def _decoder_per_pixel(vae: Component) -> int:
    """The widest live set of the decoder per output pixel, over its scales."""
    channels = list(reversed(vae.shape["channels"]))
    n = len(channels)
    widest = 0
    for i, c in enumerate(channels):
        c_in = channels[max(i - 1, 0)]
        scale = 4 ** (n - 1 - i)
        widest = max(widest, DECODER_LIVE * max(c_in, c) / scale)
    return math.ceil(widest)


def _decode_pixels(height: int, width: int, vae: Component, b: int, naive: bool) -> int:
    factor = vae.shape["factor"]
    tokens = (height // factor) * (width // factor)
    attention = (
        _attention_scores(1, tokens, 1, b, naive) or 4 * tokens * vae.shape["channels"][-1] * b
    )
    return height * width * _decoder_per_pixel(vae) * b + attention


@dataclass(frozen=True)
class Tiling:
    tile: int  # pixels
    stride: int  # pixels
    tiles: int
    active: bool  # diffusers tiles only when the latent is larger than one tile


def tiling(pipeline: Pipeline, w: DiffusionWorkload) -> Tiling:
    """diffusers' AutoencoderKL.tiled_decode: latent tiles of sample_size/8, a stride of
    (1 − overlap) of that, and only when the latent exceeds one tile."""
    f = pipeline.factor
    tile = w.vae_tile or pipeline.vae.shape["sample_size"]
    tile_latent = tile // f
    stride_latent = max(1, int(tile_latent * (1 - w.vae_tile_overlap)))
    h, wd = latent_size(pipeline, w.height, w.width)
    active = h > tile_latent or wd > tile_latent
    tiles = math.ceil(h / stride_latent) * math.ceil(wd / stride_latent)
    return Tiling(tile, stride_latent * f, tiles, active)


def decode_activations(
    pipeline: Pipeline, w: DiffusionWorkload, *, tiled: bool | None = None
) -> int:
    """The VAE decode's peak beyond its weights: the decoder's activations at the output
    resolution for the whole batch (one image with slicing); with tiling (where it
    applies), one tile's, plus the decoded tiles and the blended output kept in full."""
    b = vae_bytes_per_value(pipeline, w)
    naive = w.attention == "naive"
    images = 1 if w.vae_slicing else w.batch
    tiled = w.vae_tiling if tiled is None else tiled
    t = tiling(pipeline, w)
    if tiled and t.active:
        tile = _decode_pixels(t.tile, t.tile, pipeline.vae, b, naive)
        kept = (t.tiles * 3 * t.tile * t.tile + 2 * 3 * w.height * w.width) * b
        return tile + kept * (1 if w.vae_slicing else w.batch)
    return images * _decode_pixels(w.height, w.width, pipeline.vae, b, naive) + (
        (w.batch - images) * 3 * w.height * w.width * b
    )


def encode_activations(pipeline: Pipeline, w: DiffusionWorkload) -> int:
    """The VAE encoder's peak on the training images (when latents are not cached), with the
    decoder's factor on the encoder's full-resolution width (128 channels)."""
    b = FLOAT_BYTES[compute_dtype(w)]
    return math.ceil(
        w.batch * w.height * w.width * DECODER_LIVE * pipeline.vae.shape["channels"][0] * b
    )


# --- phases ----------------------------------------------------------------------------


@dataclass
class Phase:
    name: str  # text_encoders | denoise | refine | decode | safety_check | train_step
    components: list[str]
    resident_bytes: int  # weights on the GPU during the phase (and training states)
    activations_bytes: int
    gradients_bytes: int = 0  # of resident_bytes, in training
    optimizer_bytes: int = 0  # of resident_bytes, in training

    @property
    def total_bytes(self) -> int:
        return self.resident_bytes + self.activations_bytes


def lora_parameters(denoiser: Component, rank: int) -> int:
    """LoRA on the attention projections (to_q, to_k, to_v, to_out.0), diffusers' training
    scripts' default targets: rank × (in + out) each."""
    return rank * sum(n_in + n_out for n_in, n_out in denoiser.lora_pairs)


def phases(pipeline: Pipeline, w: DiffusionWorkload) -> list[Phase]:
    """Each phase with what is on the GPU then. No offload: every component, always. Model
    CPU offload: only the phase's component (one text encoder at a time). Sequential
    offload: only the largest single layer of the component at work."""
    weights = {c.name: component_weights(pipeline, c, w) for c in pipeline.components}
    everything = sum(weights.values())

    def resident(names: list[str]) -> int:
        if w.offload == "none":
            return everything
        if w.offload == "model":
            return max(weights[n] for n in names)
        by_name = {c.name: c for c in pipeline.components}
        return max(
            weights[n] * by_name[n].largest_layer // max(1, by_name[n].parameters) for n in names
        )

    if w.mode != "inference":
        return [_train_phase(pipeline, w, weights)]
    out = []
    for encoder in [c for c in pipeline.components if c.role == "text_encoder"]:
        out.append(Phase("text_encoders", [encoder.name], resident([encoder.name]),
                         text_activations(pipeline, encoder, w)))  # fmt: skip
    for denoiser in pipeline.denoisers:
        out.append(Phase("refine" if denoiser.name == "refiner_unet" else "denoise",
                         [denoiser.name], resident([denoiser.name]),
                         denoise_activations(pipeline, denoiser, w)))  # fmt: skip
    out.append(Phase("decode", [pipeline.vae.name], resident([pipeline.vae.name]),
                     decode_activations(pipeline, w)))  # fmt: skip
    for checker in [c for c in pipeline.components if c.role == "safety_checker"]:
        out.append(Phase("safety_check", [checker.name], resident([checker.name]),
                         text_activations(pipeline, checker, w)))  # fmt: skip
    merged: dict[str, Phase] = {}
    for phase in out:  # the text encoders' phase: its largest encoder's need
        if phase.name not in merged or phase.total_bytes > merged[phase.name].total_bytes:
            merged[phase.name] = phase
    return list(merged.values())


def _train_phase(pipeline: Pipeline, w: DiffusionWorkload, weights: dict) -> Phase:
    """One training step of the denoiser (text encoders and VAE frozen): its weights, the
    trained parameters' fp32 copy, gradients and AdamW states (8-bit Adam: 2 bytes a
    parameter), the frozen encoders unless their outputs are cached, and the activations."""
    denoiser = pipeline.denoisers[0]
    optimizer_per_param = 2 if w.optimizer == "adamw8bit" else 8
    b = FLOAT_BYTES[compute_dtype(w)]
    if w.mode == "full":
        # fp32 master weights and gradients, the optimizer's states, and autocast's cached
        # 16-bit copies of the weights during forward and backward
        trained = denoiser.parameters
        resident = denoiser.parameters * (4 + b) + denoiser.buffers * b
        gradients, optimizer = 4 * trained, optimizer_per_param * trained
    else:
        trained = lora_parameters(denoiser, w.lora_rank)
        resident = weights[denoiser.name] + 4 * trained
        gradients, optimizer = 4 * trained, optimizer_per_param * trained
        if w.denoiser_dtype not in FLOAT_BYTES:  # a quantized layer is dequantized to compute
            resident += denoiser.largest_layer * 2
    names = [denoiser.name]
    frozen = []
    if not w.cache_text_embeddings:
        frozen += [c for c in pipeline.components if c.role == "text_encoder"]
    if not w.cache_latents:
        frozen.append(pipeline.vae)
    resident += sum(weights[c.name] for c in frozen) + gradients + optimizer
    names += [c.name for c in frozen]
    activations = train_activations(pipeline, denoiser, w)
    if not w.cache_latents:
        activations = max(activations, encode_activations(pipeline, w))
    return Phase("train_step", names, resident, activations, gradients, optimizer)


# --- the answer per GPU ----------------------------------------------------------------


@dataclass
class Placement:
    weights_bytes: list[int]  # per GPU
    activations_bytes: list[int]  # per GPU: the largest phase it serves
    components: list[list[str]]  # per GPU, the whole components it holds

    @property
    def busiest(self) -> int:
        """The GPU that needs the most."""
        totals = [a + b for a, b in zip(self.weights_bytes, self.activations_bytes, strict=True)]
        return totals.index(max(totals))


def balanced(pipeline: Pipeline, w: DiffusionWorkload, gpus: int) -> Placement:
    """Whole components over `gpus` GPUs of one node, as diffusers' device_map="balanced"
    places them: largest first, each on the GPU with the least so far. Each GPU needs its
    components' weights and the activations of the largest phase it serves."""
    weights = {c.name: component_weights(pipeline, c, w) for c in pipeline.components}
    loads = [0] * gpus
    held: list[list[str]] = [[] for _ in range(gpus)]
    for name in sorted(weights, key=lambda n: -weights[n]):
        i = loads.index(min(loads))
        loads[i] += weights[name]
        held[i].append(name)
    every = phases(pipeline, DiffusionWorkload(**{**w.__dict__, "offload": "none"}))
    activations = [
        max((p.activations_bytes for p in every if set(p.components) & set(names)), default=0)
        for names in held
    ]
    return Placement(loads, activations, held)
