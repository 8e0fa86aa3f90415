"""Diffusion pipelines: parameters counted from the shipped configs, memory per phase, the
VAE decode's own peak and what tiling and offloading do to it, against published figures."""

import ast
from pathlib import Path

import pytest

from sizing.components import ComponentError
from sizing.diffusion import (
    GIB,
    PRESETS,
    DiffusionWorkload,
    decode_activations,
    lora_parameters,
    phases,
    pipeline_from_configs,
    preset_pipeline,
    tiling,
)


def _peak(slug, **workload):
    return max(p.total_bytes for p in phases(preset_pipeline(slug), DiffusionWorkload(**workload)))


def _phase(slug, name, **workload):
    every = phases(preset_pipeline(slug), DiffusionWorkload(**workload))
    return next(p for p in every if p.name == name)


COMPONENTS = [(slug, name) for slug, preset in PRESETS.items() for name in preset.published]


@pytest.mark.parametrize(("slug", "name"), COMPONENTS)
def test_every_presets_components_count_within_2_percent_of_their_published_counts(slug, name):
    pipeline = preset_pipeline(slug)
    component = next(c for c in pipeline.components if c.name == name)
    published, _words, _source = PRESETS[slug].published[name]
    counted = component.parameters + component.buffers  # SD 3.5's positional table: see PRESETS
    assert counted == pytest.approx(published, rel=0.02)


def test_counts_that_are_known_exactly():
    sd15, sdxl, flux = (preset_pipeline(s) for s in ("sd15", "sdxl", "flux-dev"))
    by_name = {(p.name, c.name): c for p in (sd15, sdxl, flux) for c in p.components}
    assert by_name[(sd15.name, "unet")].parameters == 859_520_964
    assert by_name[(sd15.name, "vae")].parameters == 83_653_863
    assert by_name[(sdxl.name, "unet")].parameters == 2_567_463_684
    assert by_name[(flux.name, "transformer")].parameters == 11_901_408_320
    assert by_name[(flux.name, "text_encoder_2")].parameters == 4_762_310_656
    # The FLUX QLoRA post's rank-4 adapters on to_q, to_k, to_v, to_out.0: 4,669,440 trainable
    assert lora_parameters(by_name[(flux.name, "transformer")], 4) == 4_669_440


def test_sd35_medium_follows_the_gguf_count_with_its_positional_table():
    transformer = next(c for c in preset_pipeline("sd35-medium").components if c.role == "denoiser")
    assert transformer.buffers == 384 * 384 * 1536
    assert transformer.parameters == pytest.approx(2.243e9, rel=0.001)
    assert (transformer.parameters + transformer.buffers) / 1e9 == pytest.approx(2.47, abs=0.005)


def test_the_decode_grows_with_pixels_and_tiling_bounds_it():
    flux = preset_pipeline("flux-dev")
    small = decode_activations(flux, DiffusionWorkload(height=1024, width=1024))
    large = decode_activations(flux, DiffusionWorkload(height=2048, width=2048))
    assert large > 3.9 * small
    tiled = decode_activations(flux, DiffusionWorkload(height=2048, width=2048, vae_tiling=True))
    assert tiled < small * 1.1  # one 1024² tile, plus the tiles and the output kept in full
    assert (
        _phase("flux-dev", "decode", height=2048, width=2048).total_bytes
        > _phase("flux-dev", "denoise", height=2048, width=2048).total_bytes
    )


def test_sdxl_at_1024_is_not_tiled_and_fp16_decodes_in_fp32():
    sdxl = preset_pipeline("sdxl")
    assert not tiling(sdxl, DiffusionWorkload(height=1024, width=1024)).active
    assert tiling(preset_pipeline("sd15"), DiffusionWorkload(height=1024, width=1024)).active
    untiled = decode_activations(sdxl, DiffusionWorkload(denoiser_dtype="fp16"))
    assert (
        decode_activations(sdxl, DiffusionWorkload(denoiser_dtype="fp16", vae_tiling=True))
        == untiled
    )
    assert untiled == 2 * decode_activations(sdxl, DiffusionWorkload(denoiser_dtype="bf16"))


def test_the_peak_is_the_largest_phase_and_offloading_lowers_it():
    none = _peak("sd35-large")
    model = _peak("sd35-large", offload="model")
    sequential = _peak("sd35-large", offload="sequential")
    assert none > model > sequential
    # model offload: only the transformer (8.1B at 2 bytes) and its step's activations
    assert (
        _phase("sd35-large", "denoise", offload="model").resident_bytes
        == (8_056_627_520 + 192 * 192 * 2432) * 2
    )
    # no offload: every component stays, and the phases do not add up
    every = phases(preset_pipeline("sd35-large"), DiffusionWorkload())
    assert none == max(p.total_bytes for p in every) < sum(p.total_bytes for p in every)


def test_guidance_doubles_the_denoisers_batch_and_naive_attention_costs_more():
    with_cfg = _phase("sd15", "denoise", height=512, width=512).activations_bytes
    without = _phase("sd15", "denoise", height=512, width=512, guidance=False).activations_bytes
    assert with_cfg == 2 * without
    naive = _phase("sd15", "denoise", height=512, width=512, attention="naive").activations_bytes
    assert naive - with_cfg >= 2 * 2 * 8 * 4096 * 4096 * 2  # 8 heads × 4096² scores, fp16/bf16


def test_fine_tuning_lora_qlora_and_full():
    qlora = _phase("flux-dev", "train_step", mode="lora", denoiser_dtype="nf4", height=768,
                   width=512, lora_rank=4, optimizer="adamw8bit")  # fmt: skip
    lora = _phase("flux-dev", "train_step", mode="lora", height=768, width=512, lora_rank=4,
                  optimizer="adamw8bit")  # fmt: skip
    full = _phase("flux-dev", "train_step", mode="full", height=512, width=512)
    assert qlora.total_bytes < lora.total_bytes < full.total_bytes
    assert full.optimizer_bytes == 8 * 11_901_408_320 and full.gradients_bytes == 4 * 11_901_408_320
    eight_bit = _phase("flux-dev", "train_step", mode="full", optimizer="adamw8bit")
    assert eight_bit.optimizer_bytes == 2 * 11_901_408_320
    # uncached latents and text embeddings keep the VAE and the encoders resident
    uncached = _phase("flux-dev", "train_step", mode="lora", cache_latents=False,
                      cache_text_embeddings=False)  # fmt: skip
    assert set(uncached.components) == {"transformer", "text_encoder", "text_encoder_2", "vae"}
    checkpointed = _phase("sdxl", "train_step", mode="lora").activations_bytes
    assert _phase("sdxl", "train_step", mode="lora", gradient_checkpointing=False
                  ).activations_bytes > 3 * checkpointed  # fmt: skip


# Published peak measurements (docs/sizing.md has the table with the conditions): the
# estimate without the CUDA context, against the figure, each within ±10 %.
MEASURED = [
    # FLUX.1-dev, 1024², H100, max_memory_reserved, whole pipeline on the GPU [S5]
    ("flux-dev", {}, 36.166),
    ("flux-dev", {"denoiser_dtype": "int8", "text_encoder_dtype": "int8"}, 21.482),
    ("flux-dev", {"denoiser_dtype": "fp8", "text_encoder_dtype": "fp8"}, 21.488),
]


@pytest.mark.parametrize(("slug", "workload", "gib"), MEASURED)
def test_estimates_are_within_10_percent_of_published_measurements(slug, workload, gib):
    assert _peak(slug, **workload) / GIB == pytest.approx(gib, rel=0.10)


def test_the_vae_decode_against_diffusers_published_decode_figures():
    """diffusers' hybrid-inference page: VAE decode alone on an RTX 4090 (23.99 GiB), in
    per cent of the card; SD 1.5 in FP16, SDXL as its pipeline runs it (FP32)."""
    card = 24564 / 1024
    cases = [
        ("sd15", "fp16", 512, False, 5.6), ("sd15", "fp16", 1024, False, 20.0),
        ("sd15", "fp16", 1024, True, 5.6), ("sdxl", "fp16", 512, False, 10.0),
        ("sdxl", "fp16", 1024, False, 35.5),
    ]  # fmt: skip
    for slug, dtype, px, tiled, percent in cases:
        pipeline = preset_pipeline(slug)
        work = DiffusionWorkload(height=px, width=px, denoiser_dtype=dtype, vae_tiling=tiled,
                                 offload="model")  # fmt: skip
        decode = next(p for p in phases(pipeline, work) if p.name == "decode")
        assert decode.total_bytes / GIB == pytest.approx(card * percent / 100, rel=0.10), (
            slug,
            px,
            tiled,
        )


@pytest.mark.parametrize(
    ("model_index", "configs", "field"),
    [
        ({"_class_name": "FluxPipeline", "transformer": ["diffusers", "MysteryModel"]}, {},
         "model_index.transformer"),
        ({"_class_name": "FluxPipeline", "transformer": ["diffusers", "FluxTransformer2DModel"],
          "vae": ["diffusers", "AutoencoderKL"]}, {"vae": {}}, "components.transformer"),
        ({"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"],
          "vae": ["diffusers", "AutoencoderKL"]},
         {"unet": {"block_out_channels": [320, 640]}, "vae": {}}, "unet.block_out_channels"),
        ({"_class_name": "NopePipeline"}, {}, "model_index._class_name"),
    ],
)  # fmt: skip
def test_pipelines_we_cannot_size_name_the_field(model_index, configs, field):
    with pytest.raises(ComponentError) as refused:
        pipeline_from_configs(model_index, configs)
    assert field in refused.value.fields


def test_the_counting_and_sizing_modules_import_nothing_of_django():
    for module in ("components", "diffusion"):
        source = Path(__file__).parents[2] / "sizing" / f"{module}.py"
        imported = {
            (node.module or "").split(".")[0]
            for node in ast.walk(ast.parse(source.read_text()))
            if isinstance(node, ast.ImportFrom)
        } | {
            alias.name.split(".")[0]
            for node in ast.walk(ast.parse(source.read_text()))
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert imported <= {"__future__", "dataclasses", "json", "math", "pathlib", "sizing"}
