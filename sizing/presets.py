"""Well-known models, as the fields of their official config.json (sizing.md §2, [S27]),
with their published parameter totals for the tests and the closing note."""

from typing import Any, TypedDict


class Preset(TypedDict):
    name: str
    published: int  # the parameter total its makers publish
    config: dict[str, Any]  # as config.json holds it


PRESETS: dict[str, Preset] = {
    "llama-2-7b": {
        "name": "Llama 2 7B",
        "published": 6_738_415_616,  # safetensors 13.48 GB at fp16 [S28]
        "config": {
            "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 11008,
            "vocab_size": 32000, "tie_word_embeddings": False,
        },
    },
    "llama-3-8b": {
        "name": "Llama 3 8B",
        "published": 8_030_261_248,
        "config": {
            "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "tie_word_embeddings": False,
        },
    },
    "llama-3-70b": {
        "name": "Llama 3 70B",
        "published": 70_553_706_496,
        "config": {
            "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
            "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
            "vocab_size": 128256, "tie_word_embeddings": False,
        },
    },
    "mistral-7b": {
        "name": "Mistral 7B v0.1",
        "published": 7_241_732_096,
        "config": {
            "model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 32000, "sliding_window": 4096, "tie_word_embeddings": False,
        },
    },
    "mixtral-8x7b": {
        "name": "Mixtral 8x7B",
        "published": 46_702_792_704,  # 46.7B total, 12.9B active [S29]
        "config": {
            "model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2,
            "tie_word_embeddings": False,
        },
    },
    "qwen2-72b": {
        "name": "Qwen2 72B",
        "published": 72_706_203_648,
        "config": {
            "model_type": "qwen2", "hidden_size": 8192, "num_hidden_layers": 80,
            "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 29568,
            "vocab_size": 152064, "tie_word_embeddings": False,
        },
    },
    "gemma-2b": {
        "name": "Gemma 2B",
        "published": 2_506_172_416,
        "config": {
            "model_type": "gemma", "hidden_size": 2048, "num_hidden_layers": 18,
            "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
            "intermediate_size": 16384, "vocab_size": 256000,
        },
    },
    "qwen2-7b": {
        "name": "Qwen2 7B",
        "published": 7_615_616_512,
        "config": {
            "model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28,
            "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
            "vocab_size": 152064, "tie_word_embeddings": False,
        },
    },
    "pythia-6.9b": {
        "name": "Pythia 6.9B (GPT-NeoX)",
        "published": 6_857_302_016,
        "config": {
            "model_type": "gpt_neox", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "intermediate_size": 16384, "vocab_size": 50432,
            "tie_word_embeddings": False,
        },
    },
    "gpt2": {
        "name": "GPT-2 (124M)",
        "published": 124_439_808,
        "config": {
            "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
            "n_positions": 1024, "vocab_size": 50257,
        },
    },
}  # fmt: skip
