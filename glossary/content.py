"""The glossary's content: the customer's Polish text (verbatim, from the data folder) and our English.

The Polish file alternates term and definition lines and ends with the disclaimer.
"""

from pathlib import Path

POLISH_FILE = Path(__file__).parent / "data" / "anchorgpu-glossary.pl.txt"

SLUGS = [
    "vram",
    "kv-cache",
    "quantization",
    "tensor-parallelism",
    "ddp",
    "fsdp",
    "cuda",
    "rocm",
    "training-checkpoint",
    "vae",
    "fixed-rental-period",
    "idempotency-key",
]

ENGLISH = [
    (
        "VRAM",
        "The accelerator's local memory. Working capacity covers more than the model weights: "
        "activations, buffers, cached state and framework allocations can also consume it.",
    ),
    (
        "KV cache",
        "Key and value tensors kept by autoregressive serving for active sequences. Model "
        "architecture, cache precision, token count and concurrency all affect the capacity needed.",
    ),
    (
        "Quantization",
        "Representing some of a model's values at reduced numerical precision. Real memory use "
        "includes format metadata and runtime workspaces; supported kernels and output quality "
        "must be checked.",
    ),
    (
        "Tensor parallelism",
        "Splitting parts of a model's tensor operations across accelerators. It can spread a "
        "model over cards, but adds communication and needs an explicitly supported serving or "
        "training strategy.",
    ),
    (
        "DistributedDataParallel (DDP)",
        "A PyTorch training approach that runs model replicas in several processes and "
        "synchronises gradients. Replication does not pool device memory into one contiguous space.",
    ),
    (
        "Fully Sharded Data Parallel (FSDP)",
        "Distributed training that shards model parameters, gradients and optimizer state. The "
        "memory savings come with communication, coordination and checkpointing requirements.",
    ),
    (
        "CUDA",
        "NVIDIA's parallel computing platform and programming model. A CUDA-dependent workload "
        "still needs a compatible GPU, driver, runtime and libraries.",
    ),
    (
        "ROCm",
        "AMD's software stack for GPU computing. Support must be checked for the exact GPU, "
        "operating system, framework build and workload dependencies.",
    ),
    (
        "Training checkpoint",
        "Saved state used to resume or reproduce training. Depending on the run it includes the "
        "model, optimizer, scheduler, random state and data progress. Verify restoring, not only "
        "saving.",
    ),
    (
        "Variational autoencoder (VAE)",
        "In a diffusion pipeline, the component that maps between latent representations and "
        "visible outputs. Decoding can peak in memory separately from denoising; supported "
        "slicing or tiling needs a quality check.",
    ),
    (
        "Fixed rental period",
        "In this catalog a week is exactly 7 days and a month exactly 30 days. Stopping a modelled "
        "allocation does not pause the paid period. GPU prices and the selected options make up "
        "a complete quote.",
    ),
    (
        "Idempotency key",
        "An identifier that lets a supported operation recognise a repeated request so the same "
        "action is not applied twice. Reuse it when retrying the same operation, not for a "
        "different purchase or configuration.",
    ),
]

DISCLAIMER_EN = (
    "Definitions explain a concept; they do not guarantee that a specific workload, library "
    "version or topology is supported by an AnchorGPU allocation."
)


def polish_entries() -> tuple[list[tuple[str, str]], str]:
    """[(term, definition)] and the disclaimer, read from the customer's file."""
    lines = [line.strip() for line in POLISH_FILE.read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line]
    *pairs, disclaimer = lines
    entries = list(zip(pairs[0::2], pairs[1::2], strict=True))
    return entries, disclaimer


def disclaimer(language: str) -> str:
    return polish_entries()[1] if language == "pl" else DISCLAIMER_EN
