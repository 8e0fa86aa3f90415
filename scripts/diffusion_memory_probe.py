# ruff: noqa: B023 (each closure runs within its own loop iteration)
"""Peak GPU memory per phase of each diffusion preset, on one real GPU with no network.

Builds every preset's pipeline from the configs in sizing/pipelines/ with random weights
(nothing is downloaded), then for each resolution (1024², 2048²) and VAE tiling off and on
measures `torch.cuda.max_memory_allocated` for one denoising step and one VAE decode, and
prints a JSON line per measurement beside the estimator's figure. Never a test dependency.

Before (on a machine with network): `make probe-wheels` (wheels into .probe-wheels/). On the
GPU machine: `python scripts/diffusion_memory_probe.py --install` installs them from there
(`pip install --no-index`) and runs; about 5-8 minutes on an H100 (FLUX's 12B random
weights dominate). NOT RUN YET: no GPU machine was lent to the work that wrote it.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".probe-wheels"
sys.path.insert(0, str(ROOT))

from sizing.diffusion import PIPELINES, PRESETS, DiffusionWorkload, phases, preset_pipeline  # noqa: E402

GIB = 2**30
TEXT_TOKENS = {"StableDiffusionPipeline": (77, 768), "StableDiffusionXLPipeline": (77, 2048),
               "StableDiffusion3Pipeline": (333, 4096), "FluxPipeline": (512, 4096)}  # fmt: skip


def install():
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                    str(WHEELS), "torch", "diffusers", "transformers", "accelerate"], check=True)  # fmt: skip


def build(cls_name, folder, name, torch, diffusers):
    config = json.loads((PIPELINES / folder / name / "config.json").read_text())
    config = {k: v for k, v in config.items() if not k.startswith("_anchorgpu")}
    cls = getattr(diffusers, cls_name)
    with torch.device("meta"):
        model = cls.from_config(config)
    return model.to_empty(device="cuda").to(torch.bfloat16)  # random (uninitialised) weights


def measure(torch, fn):
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.no_grad():
        fn()
    torch.cuda.synchronize()
    return base, torch.cuda.max_memory_allocated()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--install", action="store_true")
    parser.add_argument("--presets", default="sd15,sdxl,sd35-medium,sd35-large,flux-dev")
    args = parser.parse_args()
    if args.install:
        install()
    import diffusers
    import torch

    started = time.monotonic()
    for slug in args.presets.split(","):
        preset = PRESETS[slug]
        index = json.loads((PIPELINES / preset.folder / "model_index.json").read_text())
        denoiser_name = "unet" if "unet" in index else "transformer"
        denoiser = build(index[denoiser_name][1], preset.folder, denoiser_name, torch, diffusers)
        vae = build("AutoencoderKL", preset.folder, "vae", torch, diffusers)
        weights = torch.cuda.memory_allocated()
        tokens, width = TEXT_TOKENS[index["_class_name"]]
        pipeline = preset_pipeline(slug)
        for px in (1024, 2048):
            f = pipeline.factor
            latent = torch.randn(2 if pipeline.guidance else 1, vae.config.latent_channels,
                                 px // f, px // f, device="cuda", dtype=torch.bfloat16)  # fmt: skip
            text = torch.randn(latent.shape[0], tokens, width, device="cuda", dtype=torch.bfloat16)

            def step():
                if denoiser_name == "unet":
                    extra = {}
                    if index["_class_name"].startswith("StableDiffusionXL"):
                        extra = {"added_cond_kwargs": {
                            "text_embeds": torch.randn(latent.shape[0], 1280, device="cuda",
                                                       dtype=torch.bfloat16),
                            "time_ids": torch.zeros(latent.shape[0], 6, device="cuda",
                                                    dtype=torch.bfloat16)}}  # fmt: skip
                    denoiser(latent, 1, encoder_hidden_states=text, **extra)
                elif index["_class_name"] == "FluxPipeline":
                    packed = latent.reshape(latent.shape[0], -1, 64)
                    n = packed.shape[1]
                    denoiser(hidden_states=packed, encoder_hidden_states=text,
                             pooled_projections=torch.randn(latent.shape[0], 768, device="cuda",
                                                            dtype=torch.bfloat16),
                             timestep=torch.ones(latent.shape[0], device="cuda"),
                             guidance=torch.ones(latent.shape[0], device="cuda"),
                             img_ids=torch.zeros(n, 3, device="cuda"),
                             txt_ids=torch.zeros(tokens, 3, device="cuda"))  # fmt: skip
                else:
                    denoiser(hidden_states=latent, encoder_hidden_states=text,
                             pooled_projections=torch.randn(latent.shape[0], 2048, device="cuda",
                                                            dtype=torch.bfloat16),
                             timestep=torch.ones(latent.shape[0], device="cuda"))  # fmt: skip

            for tiled in (False, True):
                vae.enable_tiling() if tiled else vae.disable_tiling()
                work = DiffusionWorkload(height=px, width=px, vae_tiling=tiled)
                estimate = {p.name: p.total_bytes / GIB for p in phases(pipeline, work)}
                results = {}
                for phase, fn in (("denoise", step), ("decode", lambda: vae.decode(latent[:1]))):
                    if phase == "denoise" and tiled:
                        continue
                    _base, peak = measure(torch, fn)
                    results[phase] = round(peak / GIB, 3)
                print(json.dumps({"preset": slug, "px": px, "tiled": tiled,
                                  "weights_gib": round(weights / GIB, 3), "measured": results,
                                  "estimate_without_text_encoders": {
                                      k: round(v, 3) for k, v in estimate.items()},
                                  "gpu": torch.cuda.get_device_name(),
                                  "torch": torch.__version__,
                                  "diffusers": diffusers.__version__}), flush=True)  # fmt: skip
        denoiser = vae = None  # free them before the next preset
        torch.cuda.empty_cache()
    print(json.dumps({"seconds": round(time.monotonic() - started)}))


if __name__ == "__main__":
    main()
