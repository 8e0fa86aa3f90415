"""The estimator against the reference's worked cases (sizing.md §2): exact where
published, within 1 % where derived from configs."""

import ast
from pathlib import Path

import pytest

from sizing.estimator import (
    GIB,
    ArchitectureError,
    Inference,
    Training,
    architecture_from_config,
    estimate_inference,
    estimate_training,
    model_states,
    weights_bytes,
)
from sizing.presets import PRESETS

H200 = 143771 * 2**20  # what an H200 reports (nvidia-smi memory.total, checked on one)


def arch(slug):
    return architecture_from_config(PRESETS[slug]["config"])


def zero_paper_model_states(parameters: int, gpus: int, stage: int, k: int = 12) -> float:
    """The ZeRO paper's per-GPU model states (§3, Fig. 1) for mixed-precision Adam
    (2 + 2 + K bytes per parameter): stage 0 (DDP), 1 (P_os), 2 (P_os+g), 3 (P_os+g+p)."""
    p, n = parameters, gpus
    return {
        0: (2 + 2 + k) * p,
        1: 2 * p + 2 * p + k * p / n,
        2: 2 * p + (2 + k) * p / n,
        3: (2 + 2 + k) * p / n,
    }[stage]


@pytest.mark.parametrize("slug", sorted(PRESETS))
def test_every_preset_counts_its_published_parameters(slug):
    assert arch(slug).parameters() == PRESETS[slug]["published"]


def test_mixtral_counts_every_expert_and_the_active_ones():
    mixtral = arch("mixtral-8x7b")
    assert mixtral.parameters() == 46_702_792_704
    assert mixtral.parameters(active=True) == pytest.approx(12.9e9, rel=0.01)


def test_kv_cache_per_token():
    assert arch("llama-3-8b").kv_bytes_per_token(2) == 128 * 1024
    assert arch("llama-3-8b").kv_bytes_per_token(2) * 8192 == GIB  # 8k tokens: 1.0 GiB
    assert arch("llama-3-8b").kv_bytes_per_token(1) == 64 * 1024  # an fp8 cache: half
    assert arch("llama-2-7b").kv_bytes_per_token(2) == 512 * 1024
    # TP beyond the KV heads replicates them: per GPU never below one head
    assert arch("llama-3-70b").kv_bytes_per_token(2, tp=16) == 2 * 80 * 1 * 128 * 2


def test_zero_paper_per_gpu_figures():
    figures = [zero_paper_model_states(7.5e9, 64, stage) / 1e9 for stage in range(4)]
    assert [round(f, 1) for f in figures] == [120.0, 31.4, 16.6, 1.9]


def test_deepspeed_t5_3b_zero2_figure():
    parts = model_states(
        parameters=2_851_000_000, largest_layer=32_000_000, gpus=8, strategy="zero2",
        offload="none",
    )  # fmt: skip
    assert round(sum(parts) / GIB, 2) == 15.93


def test_zero3_and_offload_follow_deepspeeds_estimator():
    p, ll, n = 2_851_000_000, 32_000_000, 8
    full = sum(
        model_states(parameters=p, largest_layer=ll, gpus=n, strategy="zero3", offload="none")
    )
    assert full == 4 * ll + -(-2 * p // n) + -(-4 * p // n) + -(-12 * p // n)
    assert sum(model_states(parameters=p, largest_layer=ll, gpus=n, strategy="fsdp",
                            offload="optimizer")) == 4 * ll + -(-2 * p // n)  # fmt: skip
    assert sum(model_states(parameters=p, largest_layer=ll, gpus=n, strategy="zero3",
                            offload="optimizer_and_params")) == 4 * ll  # fmt: skip
    ddp = sum(model_states(parameters=p, largest_layer=ll, gpus=n, strategy="ddp", offload="none"))
    assert ddp == 16 * p  # not pooled: every GPU holds it all


def test_quantized_weights_keep_embeddings_and_head_at_16_bit():
    llama = arch("llama-3-8b")
    awq = weights_bytes(llama, llama.parameters(), "int4_awq")
    assert awq / 1e9 == pytest.approx(5.7, abs=0.05)  # sizing.md §1.5: about 5.7 GB
    assert weights_bytes(llama, llama.parameters(), "int4_gptq") > awq  # g_idx
    nf4 = weights_bytes(llama, llama.parameters(), "nf4")
    linear = llama.linear_params()
    rest = llama.parameters() - linear
    assert nf4 == round(linear * (4 + 8 / 64 + 32 / (64 * 256)) / 8) + 2 * rest  # 4.127 bits
    assert weights_bytes(llama, llama.parameters(), "bf16") == 2 * 8_030_261_248


def test_llama_3_70b_at_32k_on_h200s():
    llama = arch("llama-3-70b")
    p = llama.parameters()
    work = Inference(context_tokens=32768)
    one = estimate_inference(
        arch=llama, parameters=p, weights_dtype="bf16", gpus=1, device_bytes=H200, workload=work
    )
    two = estimate_inference(
        arch=llama, parameters=p, weights_dtype="bf16", gpus=2, device_bytes=H200, workload=work
    )
    fp8 = estimate_inference(
        arch=llama, parameters=p, weights_dtype="fp8", gpus=1, device_bytes=H200, workload=work
    )
    assert (one.fits, two.fits, fp8.fits) == (False, True, True)
    assert two.parallelism == "tp" and two.max_concurrent_sequences >= 1
    assert one.max_concurrent_sequences == 0


def test_a_sliding_window_caps_the_tokens_held():
    mistral = arch("mistral-7b")
    short = estimate_inference(
        arch=mistral,
        parameters=mistral.parameters(),
        weights_dtype="bf16",
        gpus=1,
        device_bytes=H200,
        workload=Inference(context_tokens=4096),
    )
    long = estimate_inference(arch=mistral, parameters=mistral.parameters(), weights_dtype="bf16",
                              gpus=1, device_bytes=H200, workload=Inference(context_tokens=32768))  # fmt: skip
    assert short.per_gpu.kv_cache_bytes == long.per_gpu.kv_cache_bytes


def test_training_activations_shrink_with_checkpointing():
    llama = arch("llama-3-8b")
    sizes = [
        estimate_training(
            arch=llama, parameters=llama.parameters(), largest_layer=None, weights_dtype="bf16",
            gpus=8, device_bytes=H200,
            workload=Training(strategy="fsdp", sequence_length=4096, activation_checkpointing=mode),
        ).per_gpu.activations_bytes
        for mode in ("none", "selective", "full")
    ]  # fmt: skip
    assert sizes[0] > sizes[1] > sizes[2] > 0
    s, h, v = 4096, 4096, 128256
    assert sizes[2] == 32 * 2 * s * h + s * v * 4  # full recompute keeps the layer input


def test_qlora_trains_adapters_on_a_4_bit_base():
    llama = arch("llama-3-8b")
    qlora = estimate_training(
        arch=llama, parameters=llama.parameters(), largest_layer=None, weights_dtype="bf16",
        gpus=1, device_bytes=24 * GIB, workload=Training(method="qlora", lora_rank=16,
                                                         activation_checkpointing="full"),
    )  # fmt: skip
    assert qlora.per_gpu.weights_bytes < 7e9 and qlora.per_gpu.optimizer_bytes < 1e9


@pytest.mark.parametrize(
    ("config", "fields"),
    [
        ({"model_type": "mamba", "hidden_size": 1}, ["model_type", "hidden_size"]),
        ({"model_type": "llama", "hidden_size": 4096}, ["num_hidden_layers", "vocab_size"]),
        (
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": 2,
                "num_attention_heads": 32,
                "num_key_value_heads": 5,
                "intermediate_size": 1,
                "vocab_size": 10,
            },
            ["num_key_value_heads"],
        ),  # fmt: skip
    ],
)
def test_configs_we_cannot_count_name_the_fields_we_need(config, fields):
    with pytest.raises(ArchitectureError) as refused:
        architecture_from_config(config)
    assert set(fields) <= set(refused.value.fields)


def test_the_estimator_imports_nothing_of_django():
    source = Path(__file__).parents[2] / "sizing" / "estimator.py"
    imported = {
        (node.module or "").split(".")[0]
        if isinstance(node, ast.ImportFrom)
        else alias.name.split(".")[0]
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "dataclasses", "typing"}  # the standard library only
