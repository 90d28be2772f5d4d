"""Released models as data: the fields of their Hugging Face ``config.json``.

Every table of the book that names a real model reads it from :data:`PRESETS`
through :func:`preset`, which parses the fields with
:meth:`TransformerConfig.from_hf_config` exactly as it would parse the checkpoint's
own file. Each entry copies the fields that shape the computation from the
checkpoint's ``config.json`` on the Hugging Face Hub; ``_name_or_path`` names the
repository. Two departures, both stated where they occur: DeepSeek-V2/V3 are listed
without their YaRN ``rope_scaling`` (refused by ``from_hf_config``, and irrelevant
to sizes), and GPT-3 175B, which never had a public checkpoint, is written in
GPT-2's format from Brown et al. 2020, Table 2.1. The DeepSeek entries keep their
mixture-of-experts fields; ``from_hf_config`` ignores them (every layer becomes a
dense one), and :func:`is_moe` lets a caller that needs whole-model sizes refuse
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiinfra.models.config import TransformerConfig

_LLAMA3 = {
    "model_type": "llama",
    "hidden_act": "silu",
    "attention_bias": False,
    "num_key_value_heads": 8,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
# DeepSeek-V2 and -V3 share their attention shape. "rope_scaling" (YaRN, factor 40)
# is left out of both entries.
_DEEPSEEK = {
    "hidden_act": "silu",
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-06,
    "rope_theta": 10000,
    "tie_word_embeddings": False,
}

PRESETS: dict[str, dict[str, Any]] = {
    "llama-3-8b": {
        **_LLAMA3,
        "_name_or_path": "meta-llama/Meta-Llama-3-8B",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
    },
    "llama-3-70b": {
        **_LLAMA3,
        "_name_or_path": "meta-llama/Meta-Llama-3-70B",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_hidden_layers": 80,
    },
    "mistral-7b": {
        "_name_or_path": "mistralai/Mistral-7B-v0.1",
        "model_type": "mistral",
        "hidden_act": "silu",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0,
        "sliding_window": 4096,
        "tie_word_embeddings": False,
        "vocab_size": 32000,
    },
    "qwen2.5-72b": {
        "_name_or_path": "Qwen/Qwen2.5-72B-Instruct",
        "model_type": "qwen2",  # q, k and v projections with biases
        "hidden_act": "silu",
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_attention_heads": 64,
        "num_hidden_layers": 80,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "max_window_layers": 70,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 131072,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "vocab_size": 152064,
    },
    "deepseek-v2": {
        **_DEEPSEEK,
        "_name_or_path": "deepseek-ai/DeepSeek-V2",
        "model_type": "deepseek_v2",
        "hidden_size": 5120,
        "intermediate_size": 12288,  # the dense MLP of the first layer
        "num_hidden_layers": 60,
        "first_k_dense_replace": 1,
        "moe_intermediate_size": 1536,
        "n_routed_experts": 160,
        "n_shared_experts": 2,
        "num_experts_per_tok": 6,
        "vocab_size": 102400,
    },
    "deepseek-v3": {
        **_DEEPSEEK,
        "_name_or_path": "deepseek-ai/DeepSeek-V3",
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "intermediate_size": 18432,  # the dense MLP of the first three layers
        "num_hidden_layers": 61,
        "first_k_dense_replace": 3,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "vocab_size": 129280,
    },
    "gpt2": {
        "_name_or_path": "openai-community/gpt2",
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-05,
        "n_embd": 768,
        "n_head": 12,
        "n_layer": 12,
        "n_positions": 1024,
        "vocab_size": 50257,
    },
    "gpt3-175b": {
        "_name_or_path": "Brown et al. 2020, Table 2.1 (no public checkpoint)",
        "model_type": "gpt2",
        "activation_function": "gelu",
        "n_embd": 12288,  # d_model; d_head = 128
        "n_head": 96,
        "n_layer": 96,
        "n_positions": 2048,  # n_ctx
        "vocab_size": 50257,  # GPT-2's tokenizer, which GPT-3 reuses
    },
}

MOE_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts")
"""``config.json`` fields that announce routed experts (DeepSeek, Mixtral, Qwen-MoE)."""


def preset(name: str) -> TransformerConfig:
    """The config of a released model of :data:`PRESETS`.

    Args:
        name: a key of :data:`PRESETS`, e.g. ``"llama-3-8b"``; case does not matter.

    Returns:
        ``TransformerConfig.from_hf_config(PRESETS[name])``.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: ``name`` is not a preset; the message lists the presets.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.lower()
    if key not in PRESETS:
        raise ValueError(f"unknown model name {name!r}; presets are {sorted(PRESETS)}")
    return TransformerConfig.from_hf_config(PRESETS[key])


def is_moe(source: Mapping[str, Any]) -> bool:
    """Whether a parsed ``config.json`` describes a mixture-of-experts model.

    Args:
        source: the parsed JSON object (a value of :data:`PRESETS`, or a file's).

    Returns:
        True when one of :data:`MOE_FIELDS` is a positive integer.
    """
    counts = [source.get(key) for key in MOE_FIELDS]
    return any(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts)


DENSE_PRESETS = tuple(name for name, fields in PRESETS.items() if not is_moe(fields))
"""The presets whose every layer the config describes: no routed experts."""
