"""Real models as data: the shape fields of their ``config.json``.

The Llama and Mistral entries copy the fields of the checkpoints' published
``config.json`` (Hugging Face hub, ``meta-llama/Meta-Llama-3-8B``,
``meta-llama/Meta-Llama-3-70B``, ``mistralai/Mistral-7B-v0.1``) that the memory
calculator reads; GPT-2 is ``openai-community/gpt2``. GPT-3 175B never had a public
checkpoint: its entry is written in GPT-2's format from Brown et al. 2020, Table 2.1
(96 layers, d_model 12288, 96 heads, context 2048) and the GPT-2 tokenizer's 50257
tokens. Tests pin the parameter counts computed from these dictionaries to the
published totals.
"""

from __future__ import annotations

from typing import Any

from aiinfra.memory.config import ModelConfig, load_config

PRESETS: dict[str, dict[str, Any]] = {
    "llama-3-8b": {
        "_name_or_path": "meta-llama/Meta-Llama-3-8B",
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "vocab_size": 128256,
    },
    "llama-3-70b": {
        "_name_or_path": "meta-llama/Meta-Llama-3-70B",
        "model_type": "llama",
        "hidden_act": "silu",
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_hidden_layers": 80,
        "num_key_value_heads": 8,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-05,
        "tie_word_embeddings": False,
        "vocab_size": 128256,
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
        "tie_word_embeddings": False,
        "vocab_size": 32000,
    },
    "gpt2": {
        "_name_or_path": "openai-community/gpt2",
        "model_type": "gpt2",
        "activation_function": "gelu_new",
        "n_embd": 768,
        "n_head": 12,
        "n_layer": 12,
        "n_positions": 1024,
        "vocab_size": 50257,
    },
    "gpt3-175b": {
        "_name_or_path": "gpt3-175b (Brown et al. 2020, Table 2.1)",
        "model_type": "gpt2",
        "activation_function": "gelu",
        "n_embd": 12288,
        "n_head": 96,
        "n_layer": 96,
        "n_positions": 2048,
        "vocab_size": 50257,
    },
}


def preset(name: str) -> ModelConfig:
    """Return the :class:`ModelConfig` of a named real model.

    Args:
        name: a key of :data:`PRESETS`, e.g. ``"llama-3-8b"`` (case-insensitive).

    Returns:
        The model's shape.

    Raises:
        ValueError: the name is not a preset; the message lists the presets.
    """
    key = name.lower()
    if key not in PRESETS:
        raise ValueError(f"unknown model {name!r}; presets are {sorted(PRESETS)}")
    return load_config(PRESETS[key])
