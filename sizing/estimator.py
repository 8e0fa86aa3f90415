"""How much GPU memory a model and a workload need, per GPU, in bytes.

Plain Python with no Django: the formulas of docs/sizing.md (accelerate's
weights, vLLM's KV cache and budget, the ZeRO paper and DeepSpeed's estimators for model
states, Korthikanti et al. for activations). Everything is in bytes; GiB and GB are for
the page to label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GIB = 2**30

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
# Bits per weight of the quantized linear layers, metadata included (§1.5): AWQ/GPTQ g128
# = 4-bit weights + fp16 scales + 4-bit zeros per group of 128 (GPTQ adds an int32 g_idx
# per input row, counted per layer); NF4 with double quantization.
QUANT_BITS = {"int4_gptq": 4 + 16 / 128 + 4 / 128, "int4_awq": 4 + 16 / 128 + 4 / 128}
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)
WEIGHT_FORMATS = ("fp32", "bf16", "fp16", "fp8", "int8", "int4_gptq", "int4_awq", "nf4")
QUANTIZED = ("fp8", "int8", "int4_gptq", "int4_awq", "nf4")


class ArchitectureError(ValueError):
    """A config.json we cannot count: `fields` names what is missing or wrong."""

    def __init__(self, message: str, fields: list[str]):
        super().__init__(message)
        self.fields = fields


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer, as its config.json describes it."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU/GeGLU: gate, up and down projections
    linear_bias: bool = False  # every linear layer has a bias (GPT-2, GPT-NeoX)
    qkv_bias: bool = False  # only q, k, v have biases (Qwen2)
    layer_norm_bias: bool = False  # LayerNorm (weight and bias) rather than RMSNorm
    learned_positions: int = 0  # GPT-2's position embedding table
    experts: int = 1
    experts_per_token: int = 1
    sliding_window: int | None = None

    @property
    def attention_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        return self.kv_heads * self.head_dim

    def linears(self) -> list[tuple[int, int, int]]:
        """(in, out, copies per layer) of every linear layer in one transformer block."""
        h, a, kv, i = self.hidden, self.attention_width, self.kv_width, self.intermediate
        attention = [(h, a, 1), (h, kv, 1), (h, kv, 1), (a, h, 1)]
        mlp = [(h, i, self.experts), (h, i, self.experts)] if self.gated_mlp else []
        mlp += [(i, h, self.experts)] if self.gated_mlp else [(h, i, 1), (i, h, 1)]
        return attention + mlp

    def _block_linear_params(self, experts: int) -> int:
        total = 0
        for n_in, n_out, copies in self.linears():
            copies = min(copies, experts)
            total += n_in * n_out * copies + (n_out * copies if self.linear_bias else 0)
        return total

    def _block_other_params(self) -> int:
        norms = 2 * self.hidden * (2 if self.layer_norm_bias else 1)
        qkv_bias = self.attention_width + 2 * self.kv_width if self.qkv_bias else 0
        router = self.hidden * self.experts if self.experts > 1 else 0
        return norms + qkv_bias + router

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden + self.learned_positions * self.hidden

    @property
    def head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    @property
    def final_norm_params(self) -> int:
        return self.hidden * (2 if self.layer_norm_bias else 1)

    def linear_params(self, experts: int | None = None) -> int:
        """Parameters in the blocks' linear layers (what quantization compresses)."""
        return self.layers * self._block_linear_params(experts or self.experts)

    def parameters(self, *, active: bool = False) -> int:
        """Every parameter: embeddings, blocks (all experts, or the active ones), norms,
        biases, and the head unless it is tied to the embeddings."""
        experts = self.experts_per_token if active else self.experts
        return (
            self.embedding_params
            + self.layers * (self._block_linear_params(experts) + self._block_other_params())
            + self.final_norm_params
            + self.head_params
        )

    def largest_layer_parameters(self) -> int:
        """The biggest single module: a block, or the embedding table (DeepSpeed's LL)."""
        block = self._block_linear_params(self.experts) + self._block_other_params()
        return max(block, self.vocab * self.hidden)

    def gptq_index_bytes(self) -> int:
        """GPTQ's int32 g_idx: one per input row of every quantized linear layer."""
        return 4 * self.layers * sum(n_in * copies for n_in, _out, copies in self.linears())

    def kv_bytes_per_token(self, kv_bytes: int, *, tp: int = 1) -> int:
        """K and V for one token across all layers; under tensor parallelism, per GPU
        (`max(1, kv_heads // tp)` heads: replicated when tp exceeds them)."""
        heads = self.kv_heads if tp == 1 else max(1, self.kv_heads // tp)
        return 2 * self.layers * heads * self.head_dim * kv_bytes


def _need(config: dict[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        if config.get(name) is not None:
            return config[name]
    if default is not None:
        return default
    raise ArchitectureError(f"config.json lacks {names[0]}", [names[0]])


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArchitectureError(f"{name} must be a positive whole number", [name])
    return value


LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "qwen3"}
NEOX_LIKE = {"gpt_neox"}
GPT2_LIKE = {"gpt2"}
REQUIRED = {
    "llama-like": ["hidden_size", "num_hidden_layers", "num_attention_heads",
                   "intermediate_size", "vocab_size"],
    "gpt2": ["n_embd", "n_layer", "n_head", "vocab_size"],
}  # fmt: skip


def architecture_from_config(config: dict[str, Any]) -> Architecture:
    """Read a Hugging Face config.json (a dict; never downloaded). The decoder families of
    the reference: Llama, Mistral, Mixtral and MoE generally, Qwen2, Gemma, GPT-NeoX and
    GPT-2. Anything else is refused, naming the fields we would need."""
    if not isinstance(config, dict):
        raise ArchitectureError("config must be a JSON object", ["config"])
    kind = config.get("model_type")
    family = "gpt2" if kind in GPT2_LIKE else "llama-like"
    missing = [name for name in REQUIRED[family] if config.get(name) is None]
    if missing and (kind in GPT2_LIKE | LLAMA_LIKE | NEOX_LIKE):
        raise ArchitectureError(f"config.json lacks {', '.join(missing)}", missing)
    if kind in GPT2_LIKE:
        hidden = _positive_int(_need(config, "n_embd"), "n_embd")
        heads = _positive_int(_need(config, "n_head"), "n_head")
        return Architecture(
            layers=_positive_int(_need(config, "n_layer"), "n_layer"),
            hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
            intermediate=_positive_int(_need(config, "n_inner", default=4 * hidden), "n_inner"),
            vocab=_positive_int(_need(config, "vocab_size"), "vocab_size"),
            tied_embeddings=bool(config.get("tie_word_embeddings", True)), gated_mlp=False,
            linear_bias=True, layer_norm_bias=True,
            learned_positions=_positive_int(_need(config, "n_positions", default=1024), "n_positions"),
        )  # fmt: skip
    if kind not in LLAMA_LIKE | NEOX_LIKE:
        raise ArchitectureError(
            f"unknown architecture {kind!r}: give model_type (llama, mistral, mixtral, qwen2, "
            "gemma, gpt_neox, gpt2) and " + ", ".join(REQUIRED["llama-like"]),
            ["model_type", *REQUIRED["llama-like"]],
        )
    hidden = _positive_int(_need(config, "hidden_size"), "hidden_size")
    heads = _positive_int(_need(config, "num_attention_heads"), "num_attention_heads")
    kv_heads = _positive_int(
        _need(config, "num_key_value_heads", default=heads), "num_key_value_heads"
    )
    if heads % kv_heads:
        raise ArchitectureError(
            "num_attention_heads must be a multiple of num_key_value_heads",
            ["num_key_value_heads"],
        )
    experts = _positive_int(
        _need(config, "num_local_experts", "num_experts", default=1), "num_local_experts"
    )
    neox = kind in NEOX_LIKE
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    return Architecture(
        layers=_positive_int(_need(config, "num_hidden_layers"), "num_hidden_layers"),
        hidden=hidden, heads=heads, kv_heads=kv_heads,
        head_dim=_positive_int(_need(config, "head_dim", default=hidden // heads), "head_dim"),
        intermediate=_positive_int(_need(config, "intermediate_size"), "intermediate_size"),
        vocab=_positive_int(_need(config, "vocab_size"), "vocab_size"),
        tied_embeddings=bool(config.get("tie_word_embeddings", kind in {"gemma", "gemma2"})),
        gated_mlp=not neox, linear_bias=neox, layer_norm_bias=neox,
        qkv_bias=kind in {"qwen2", "qwen2_moe"},
        experts=experts,
        experts_per_token=_positive_int(
            _need(config, "num_experts_per_tok", default=1), "num_experts_per_tok"
        ) if experts > 1 else 1,
        sliding_window=window if isinstance(window, int) and window > 0 else None,
    )  # fmt: skip


def weights_bytes(arch: Architecture | None, parameters: int, dtype: str) -> int:
    """The whole model at `dtype`. Quantized formats compress the blocks' linear layers
    (with their metadata) and keep embeddings, head and norms in 16-bit."""
    if dtype in DTYPE_BYTES and dtype not in QUANTIZED:
        return parameters * DTYPE_BYTES[dtype]
    linear = arch.linear_params() if arch else parameters
    rest = parameters - linear
    if dtype in ("fp8", "int8"):
        quantized = linear
    elif dtype == "nf4":
        quantized = round(linear * NF4_BITS / 8)
    else:
        quantized = round(linear * QUANT_BITS[dtype] / 8)
        if dtype == "int4_gptq" and arch:
            quantized += arch.gptq_index_bytes()
    return quantized + rest * 2


def kv_cache_dtype_bytes(kv_dtype: str, weights_dtype: str) -> int:
    """`auto` is the model's compute dtype: fp32 for fp32 weights, else 16-bit."""
    if kv_dtype == "auto":
        return 4 if weights_dtype == "fp32" else 2
    return DTYPE_BYTES[kv_dtype]


@dataclass
class PerGpu:
    weights_bytes: int = 0
    kv_cache_bytes: int = 0
    gradients_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0
    overhead_bytes: int = 0

    @property
    def model_states_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> int:
        return (
            self.model_states_bytes
            + self.kv_cache_bytes
            + self.activations_bytes
            + self.overhead_bytes
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_cache_bytes": self.kv_cache_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "model_states_bytes": self.model_states_bytes,
            "activations_bytes": self.activations_bytes,
            "overhead_bytes": self.overhead_bytes,
            "total_bytes": self.total_bytes,
        }


@dataclass(frozen=True)
class Inference:
    context_tokens: int = 8192
    concurrent_sequences: int = 1
    kv_cache_dtype: str = "auto"
    memory_utilization: float = 0.90
    max_batched_tokens: int = 8192  # what the engine profiles its peak activations at


@dataclass(frozen=True)
class Training:
    method: str = "full"  # full | lora | qlora
    optimizer: str = "adamw"  # adamw | sgd
    precision: str = "mixed"  # mixed | fp32
    strategy: str = "ddp"  # ddp | fsdp | zero2 | zero3
    offload: str = "none"  # none | optimizer | optimizer_and_params
    micro_batch: int = 1
    sequence_length: int = 2048
    activation_checkpointing: str = "none"  # none | selective | full
    lora_rank: int = 16
    memory_utilization: float = 0.95


@dataclass(frozen=True)
class Overhead:
    """Framework and CUDA context per GPU, and the allocator's fragmentation."""

    context_bytes: int = 2 * GIB
    fragmentation: float = 0.05


DEFAULT_OVERHEAD = Overhead()


@dataclass
class Estimate:
    per_gpu: PerGpu
    usable_bytes: int
    parallelism: str
    max_concurrent_sequences: int | None = None
    caveats: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.per_gpu.total_bytes <= self.usable_bytes

    @property
    def headroom_bytes(self) -> int:
        return self.usable_bytes - self.per_gpu.total_bytes


def _overhead(per_gpu: PerGpu, overhead: Overhead) -> int:
    return overhead.context_bytes + round(per_gpu.total_bytes * overhead.fragmentation)


def estimate_inference(
    *, arch: Architecture | None, parameters: int, weights_dtype: str, gpus: int,
    device_bytes: int, workload: Inference, overhead: Overhead = DEFAULT_OVERHEAD,
) -> Estimate:  # fmt: skip
    """One serving instance over `gpus` GPUs with tensor parallelism: weights split, KV
    cache per GPU at `max(1, kv_heads // tp)` heads, activations of the engine's profiling
    pass, and vLLM's budget (`device × memory_utilization`); the KV cache takes the rest,
    which gives the most concurrent sequences at the chosen context."""
    usable = int(device_bytes * workload.memory_utilization)
    per_gpu = PerGpu(weights_bytes=-(-weights_bytes(arch, parameters, weights_dtype) // gpus))
    max_sequences = None
    if arch:
        kv_bytes = kv_cache_dtype_bytes(workload.kv_cache_dtype, weights_dtype)
        tokens = min(workload.context_tokens, arch.sliding_window or workload.context_tokens)
        per_sequence = tokens * arch.kv_bytes_per_token(kv_bytes, tp=gpus)
        per_gpu.kv_cache_bytes = workload.concurrent_sequences * per_sequence
        batched = min(
            workload.max_batched_tokens, workload.context_tokens * workload.concurrent_sequences
        )
        # The profiling pass's peak: the MLP's widest intermediate (gate and up) at 16-bit,
        # split by TP, plus fp32 logits for the sequences sampled.
        per_gpu.activations_bytes = (
            batched * arch.intermediate * 2 * 2 // gpus
            + workload.concurrent_sequences * arch.vocab * 4
        )
        per_gpu.overhead_bytes = _overhead(per_gpu, overhead)
        spare = usable - (per_gpu.total_bytes - per_gpu.kv_cache_bytes)
        max_sequences = max(0, spare // per_sequence) if per_sequence else None
    else:
        per_gpu.overhead_bytes = _overhead(per_gpu, overhead)
    return Estimate(
        per_gpu=per_gpu, usable_bytes=usable, parallelism="single" if gpus == 1 else "tp",
        max_concurrent_sequences=max_sequences,
    )  # fmt: skip


def activations_bytes(arch: Architecture, workload: Training) -> int:
    """Korthikanti et al. (no tensor parallelism): per layer s·b·h·(34 + 5·a·s/h) bytes with
    nothing recomputed, 34·s·b·h with selective recompute, 2·s·b·h (the layer input) with
    full recompute; plus the fp32 logits, b·s·V·4."""
    s, b, h, a = workload.sequence_length, workload.micro_batch, arch.hidden, arch.heads
    if workload.activation_checkpointing == "full":
        per_layer = 2 * s * b * h
    elif workload.activation_checkpointing == "selective":
        per_layer = 34 * s * b * h
    else:
        per_layer = s * b * h * 34 + 5 * a * s * s * b
    return arch.layers * per_layer + b * s * arch.vocab * 4


def model_states(
    *,
    parameters: int,
    largest_layer: int,
    gpus: int,
    strategy: str,
    offload: str,
    precision: str = "mixed",
    optimizer: str = "adamw",
) -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) per GPU for full training.

    DDP holds everything on every GPU (memory is not pooled). ZeRO-2 follows DeepSpeed's
    estimator, 4P + 16P/N (2P with the optimizer offloaded). ZeRO-3 and FSDP full shard:
    4·largest layer + 18P/N, 4·LL + 2P/N with the optimizer offloaded, 4·LL with
    parameters offloaded too. The split into the three parts is ours; the sums are
    DeepSpeed's."""
    p, n, ll = parameters, gpus, largest_layer
    weight = 4 if precision == "fp32" else 2
    states = (
        (8 if precision == "fp32" else 12)
        if optimizer == "adamw"
        else (4 if precision == "fp32" else 8)
    )
    if strategy == "ddp":
        return weight * p, weight * p, states * p
    if strategy == "zero2":
        if offload != "none":
            return 2 * p, 0, 0
        return 2 * p, 2 * p, -(-16 * p // n)
    # zero3, fsdp
    if offload == "optimizer_and_params":
        return 4 * ll, 0, 0
    if offload == "optimizer":
        return 4 * ll + -(-2 * p // n), 0, 0
    return 4 * ll + -(-2 * p // n), -(-4 * p // n), -(-12 * p // n)


def lora_parameters(arch: Architecture, rank: int) -> int:
    """Adapters on every linear layer of the blocks: rank × (in + out) each."""
    return arch.layers * sum((n_in + n_out) * rank * c for n_in, n_out, c in arch.linears())


def estimate_training(
    *, arch: Architecture | None, parameters: int, largest_layer: int | None, weights_dtype: str,
    gpus: int, device_bytes: int, workload: Training, overhead: Overhead = DEFAULT_OVERHEAD,
) -> Estimate:  # fmt: skip
    usable = int(device_bytes * workload.memory_utilization)
    per_gpu = PerGpu()
    ll = largest_layer or (arch.largest_layer_parameters() if arch else parameters)
    strategy = workload.strategy
    if workload.method == "full":
        per_gpu.weights_bytes, per_gpu.gradients_bytes, per_gpu.optimizer_bytes = model_states(
            parameters=parameters, largest_layer=ll, gpus=gpus, strategy=strategy,
            offload=workload.offload, precision=workload.precision, optimizer=workload.optimizer,
        )  # fmt: skip
    else:
        base_dtype = "nf4" if workload.method == "qlora" else weights_dtype
        adapters = lora_parameters(arch, workload.lora_rank) if arch else 0
        frozen = weights_bytes(arch, parameters, base_dtype)
        shard = gpus if strategy in ("fsdp", "zero3") else 1
        per_gpu.weights_bytes = -(-frozen // shard) + 2 * adapters
        per_gpu.gradients_bytes = 2 * adapters
        per_gpu.optimizer_bytes = 12 * adapters
    if arch:
        per_gpu.activations_bytes = activations_bytes(arch, workload)
    per_gpu.overhead_bytes = _overhead(per_gpu, overhead)
    return Estimate(
        per_gpu=per_gpu, usable_bytes=usable, parallelism=strategy if gpus > 1 else "single"
    )
