"""Released models as data: the fields of their Hugging Face ``config.json``.

Every table of the book that names a real model reads it from :data:`PRESETS`
through :func:`preset`, which parses the fields with
:meth:`TransformerConfig.from_hf_config` exactly as it would parse the checkpoint's
own file. Each entry copies the fields that shape the computation from the
checkpoint's ``config.json`` on the Hugging Face Hub; ``_name_or_path`` names the
repository. Two departures, both stated where they occur: DeepSeek-V2/V3 are listed
without their YaRN ``rope_scaling`` (refused by ``from_hf_config``, and irrelevant
to sizes), and GPT-3 175B, which never had a public checkpoint, is written in
GPT-2's format from Brown et al. 2020, Table 2.1. The mixture-of-experts entries
(Mixtral 8x7B, Qwen1.5-MoE-A2.7B, DeepSeek-V2/V3) carry their expert fields, which
``from_hf_config`` reads; :data:`DENSE_PRESETS` lists the others, for callers
(the memory calculator, the planner) that model dense layers only.
:data:`PAPER_MODELS` adds models known from a paper's table. Together they are the
one registry of model names, :data:`MODEL_NAMES`, that every command and page
reads through :func:`preset`, in any case.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiinfra.checks import is_int
from aiinfra.models.config import TransformerConfig
from aiinfra.models.hf.moe_config import MOE_FIELDS

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
# is left out of both entries, and so are the balancing losses' weights.
_DEEPSEEK = {
    "moe_layer_freq": 1,
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
        "scoring_func": "softmax",
        "topk_method": "group_limited_greedy",  # device-limited routing, M = 3
        "n_group": 8,
        "topk_group": 3,
        "norm_topk_prob": False,
        "routed_scaling_factor": 16.0,
        "vocab_size": 102400,
    },
    "deepseek-v3": {
        **_DEEPSEEK,
        "_name_or_path": "deepseek-ai/DeepSeek-V3",
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "intermediate_size": 18432,  # the dense MLP of the first three layers
        "num_hidden_layers": 61,  # the main model; the MTP module is layer 61
        "num_nextn_predict_layers": 1,  # one MTP module (not built here)
        "first_k_dense_replace": 3,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "scoring_func": "sigmoid",
        "topk_method": "noaux_tc",  # node-limited routing, M = 4, bias-balanced
        "n_group": 8,
        "topk_group": 4,
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.5,
        "vocab_size": 129280,
    },
    # Mixtral 8x7B: Mistral 7B's attention, eight SwiGLU experts of Mistral's width
    # (intermediate_size) in every layer, top-2, no sliding window. Every value
    # equals the default of transformers' MixtralConfig, documented against this
    # checkpoint, except max_position_embeddings (131072 there, 32768 in the
    # checkpoint's config.json).
    "mixtral-8x7b": {
        "_name_or_path": "mistralai/Mixtral-8x7B-v0.1",
        "model_type": "mixtral",
        "hidden_act": "silu",
        "hidden_size": 4096,
        "intermediate_size": 14336,  # each expert's width
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-05,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "vocab_size": 32000,
    },
    # Qwen1.5-MoE-A2.7B: Qwen2's attention (q/k/v biases, MHA), 60 experts of 1408,
    # top-4 without renormalization, one shared expert of 5632 behind a sigmoid
    # gate. Every size equals the default of transformers' Qwen2MoeConfig,
    # documented against this checkpoint; config.json sets rope_theta (1e6),
    # 8192 positions and a window that use_sliding_window leaves off.
    "qwen1.5-moe-a2.7b": {
        "_name_or_path": "Qwen/Qwen1.5-MoE-A2.7B",
        "model_type": "qwen2_moe",
        "hidden_act": "silu",
        "hidden_size": 2048,
        "intermediate_size": 5632,  # the dense MLP (no layer has one)
        "num_attention_heads": 16,
        "num_hidden_layers": 24,
        "num_key_value_heads": 16,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "norm_topk_prob": False,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "max_position_embeddings": 8192,
        "max_window_layers": 21,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "use_sliding_window": False,
        "tie_word_embeddings": False,
        "vocab_size": 151936,
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


# Dubey et al. 2024 ("The Llama 3 Herd of Models"), Table 3, in config.json fields.
PAPER_MODELS: dict[str, dict[str, Any]] = {
    "llama-3-405b": {
        **{k: v for k, v in PRESETS["llama-3-70b"].items() if k != "_name_or_path"},
        "_name_or_path": "Dubey et al. 2024, Table 3 (Llama 3 405B)",
        "hidden_size": 16384,
        "intermediate_size": 53248,
        "num_attention_heads": 128,
        "num_key_value_heads": 8,
        "num_hidden_layers": 126,
    },
}
MODEL_NAMES = tuple(sorted((*PRESETS, *PAPER_MODELS)))
"""Every model name a command or page accepts, in any case."""


def model_fields(name: str) -> dict[str, Any]:
    """The ``config.json`` fields of a name of :data:`MODEL_NAMES`, in any case.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: an unknown name; the message lists :data:`MODEL_NAMES`.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    key = name.lower()
    if key not in PRESETS and key not in PAPER_MODELS:
        raise ValueError(
            f"unknown model name {name!r}; the names are {', '.join(MODEL_NAMES)}"
        )
    return PRESETS.get(key) or PAPER_MODELS[key]


def preset(name: str) -> TransformerConfig:
    """The config of a model of :data:`MODEL_NAMES` (a released one or a paper's).

    Args:
        name: e.g. ``"llama-3-8b"``; case does not matter.

    Returns:
        ``TransformerConfig.from_hf_config`` of its fields.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: ``name`` is not known; the message lists the names.
    """
    return TransformerConfig.from_hf_config(model_fields(name))


def is_moe(source: Mapping[str, Any]) -> bool:
    """Whether a parsed ``config.json`` describes a mixture-of-experts model.

    Args:
        source: the parsed JSON object (a value of :data:`PRESETS`, or a file's).

    Returns:
        True when one of :data:`MOE_FIELDS` is a positive integer.
    """
    counts = [source.get(key) for key in MOE_FIELDS]
    return any(is_int(n) and n > 0 for n in counts)


DENSE_PRESETS = tuple(name for name, fields in PRESETS.items() if not is_moe(fields))
"""The presets without routed experts: every layer has a dense MLP."""
MOE_PRESETS = tuple(name for name in PRESETS if name not in DENSE_PRESETS)
"""The mixture-of-experts presets."""
