"""A flat model configuration that a Hugging Face ``config.json`` can fill.

Every Llama-style decoder is described by a dozen integers: the width ``d_model``,
the depth ``n_layers``, the query heads ``n_heads`` and the key/value heads
``n_kv_heads`` (MHA when equal, MQA when 1, GQA in between; Ainslie et al. 2023), the
head dimension, the SwiGLU width ``d_ff``, the vocabulary and the RoPE table. Models
with multi-head latent attention (DeepSeek-V2, Sec. 2.1) add the latent widths
``kv_lora_rank`` (d_c), ``q_lora_rank`` (d_c') and the decoupled RoPE width
``rope_head_dim`` (d_h^R). :meth:`TransformerConfig.from_hf_config` maps the
Hugging Face names onto these and rejects a missing or malformed field by name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# region hf-fields
# Hugging Face name -> (our field, expected type, required).
HF_FIELDS: dict[str, tuple[str, type, bool]] = {
    "vocab_size": ("vocab_size", int, True),
    "hidden_size": ("d_model", int, True),
    "num_hidden_layers": ("n_layers", int, True),
    "num_attention_heads": ("n_heads", int, True),
    "intermediate_size": ("d_ff", int, True),
    "num_key_value_heads": ("n_kv_heads", int, False),
    "head_dim": ("head_dim", int, False),
    "max_position_embeddings": ("max_seq_len", int, False),
    "rope_theta": ("rope_theta", float, False),
    "rms_norm_eps": ("norm_eps", float, False),
    "tie_word_embeddings": ("tie_embeddings", bool, False),
    "kv_lora_rank": ("kv_lora_rank", int, False),
    "q_lora_rank": ("q_lora_rank", int, False),
    "qk_rope_head_dim": ("rope_head_dim", int, False),
}
# endregion


@dataclass
class TransformerConfig:
    """Shape of a decoder-only Transformer; defaults give a toy model for tests.

    ``n_kv_heads`` and ``head_dim`` default (``None``) to ``n_heads`` and
    ``d_model // n_heads``; after construction both are integers.

    Raises:
        ValueError: a size is not a positive integer, ``n_heads`` is not divisible by
            ``n_kv_heads``, ``d_model`` by ``n_heads`` (when ``head_dim`` is not
            given), or a RoPE width is odd.
    """

    vocab_size: int = 256  # one token per byte: no tokenizer needed in examples
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None  # None: one KV head per query head (MHA)
    head_dim: int | None = None  # None: d_model // n_heads
    d_ff: int = 176  # about (8/3) d_model: SwiGLU at the parameters of a 4d MLP
    max_seq_len: int = 128  # length of the RoPE table; longer inputs are rejected
    rope_theta: float = 10000.0  # RoFormer's base
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    kv_lora_rank: int = 0  # d_c of MLA; 0 selects GQA/MHA/MQA attention
    q_lora_rank: int = 0  # d_c' of MLA; 0 means queries are not compressed
    rope_head_dim: int = 0  # d_h^R of MLA's decoupled RoPE query and key

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff"):
            _check_positive_int(name, getattr(self, name))
        _check_positive_int("max_seq_len", self.max_seq_len)
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        _check_positive_int("n_kv_heads", self.n_kv_heads)
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be divisible by n_kv_heads "
                f"({self.n_kv_heads}): each KV head serves a whole group of queries"
            )
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_model ({self.d_model}) must be divisible by n_heads "
                    f"({self.n_heads}) unless head_dim is given"
                )
            self.head_dim = self.d_model // self.n_heads
        _check_positive_int("head_dim", self.head_dim)
        for name in ("kv_lora_rank", "q_lora_rank", "rope_head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
        rope_dim = self.rope_head_dim if self.is_mla else self.head_dim
        if rope_dim <= 0 or rope_dim % 2:
            which = "rope_head_dim" if self.is_mla else "head_dim"
            raise ValueError(
                f"{which} must be even and positive (RoPE rotates pairs), got "
                f"{rope_dim}"
            )
        if not self.rope_theta > 0 or not self.norm_eps > 0:
            raise ValueError(
                f"rope_theta and norm_eps must be > 0, got {self.rope_theta}, "
                f"{self.norm_eps}"
            )

    @property
    def is_mla(self) -> bool:
        """Whether the layers use multi-head latent attention."""
        return self.kv_lora_rank > 0

    @classmethod
    def from_hf_config(
        cls, source: Mapping[str, Any] | str | os.PathLike
    ) -> TransformerConfig:
        """Build a config from a Hugging Face ``config.json`` (a dict or a path).

        Unknown keys (``rope_scaling``, MoE sizes, ``torch_dtype``) are ignored. For
        MLA models the head dimension is ``qk_nope_head_dim``, and ``v_head_dim``
        must equal it.

        Args:
            source: the parsed JSON object, or the path of the file.

        Returns:
            The config.

        Raises:
            ValueError: a required field is missing, a field has the wrong type or
                value, or the fields are inconsistent (see :class:`TransformerConfig`).
            FileNotFoundError: ``source`` is a path that does not exist.
        """
        if isinstance(source, str | os.PathLike):
            with open(source, encoding="utf-8") as f:
                source = json.load(f)
        if not isinstance(source, Mapping):
            raise ValueError(
                f"config must be a JSON object, got {type(source).__name__}"
            )
        kwargs: dict[str, Any] = {}
        for key, (name, kind, required) in HF_FIELDS.items():
            value = source.get(key)
            if value is None:  # absent, or null as in DeepSeek-V2-Lite's q_lora_rank
                if required:
                    raise ValueError(f"config field {key!r} is missing")
                continue
            kwargs[name] = _convert(key, value, kind)
        if kwargs.get("kv_lora_rank"):
            for key in ("qk_nope_head_dim", "qk_rope_head_dim"):
                if source.get(key) is None:
                    raise ValueError(f"config field {key!r} is missing (MLA needs it)")
            kwargs["head_dim"] = _convert(
                "qk_nope_head_dim", source["qk_nope_head_dim"], int
            )
            v_head_dim = source.get("v_head_dim", kwargs["head_dim"])
            if v_head_dim != kwargs["head_dim"]:
                raise ValueError(
                    f"config field 'v_head_dim' ({v_head_dim}) must equal "
                    f"'qk_nope_head_dim' ({kwargs['head_dim']}) in this model"
                )
        return cls(**kwargs)


def _check_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _convert(key: str, value: Any, kind: type) -> Any:
    """Check one JSON value against its expected type; ints are valid floats."""
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        if value <= 0 and key not in ("kv_lora_rank", "q_lora_rank"):
            raise ValueError(f"config field {key!r} must be positive, got {value}")
        return value
    if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"config field {key!r} must be positive, got {value}")
        return float(value)
    raise ValueError(
        f"config field {key!r} must be {kind.__name__}, got {value!r} "
        f"({type(value).__name__})"
    )


def published_config(name: str) -> TransformerConfig:
    """The config of a released model from :data:`PUBLISHED_CONFIGS`.

    Raises:
        ValueError: ``name`` is not one of them.
    """
    if name not in PUBLISHED_CONFIGS:
        raise ValueError(f"unknown model {name!r}; known: {sorted(PUBLISHED_CONFIGS)}")
    return TransformerConfig.from_hf_config(PUBLISHED_CONFIGS[name])


_LLAMA3 = {
    "vocab_size": 128256,
    "num_key_value_heads": 8,
    "rope_theta": 500000.0,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
}
_DEEPSEEK = {
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "rms_norm_eps": 1e-6,
}

# The attention-relevant fields of each model's config.json on the Hugging Face Hub
# (repositories meta-llama/Meta-Llama-3-8B, meta-llama/Meta-Llama-3-70B,
# mistralai/Mistral-7B-v0.1, Qwen/Qwen2.5-72B-Instruct, deepseek-ai/DeepSeek-V2,
# deepseek-ai/DeepSeek-V3). For the DeepSeek models intermediate_size is the width of
# the few dense MLP layers; their MoE layers are not modelled here.
PUBLISHED_CONFIGS: dict[str, dict[str, Any]] = {
    "Llama-3-8B": {
        **_LLAMA3,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
    },
    "Llama-3-70B": {
        **_LLAMA3,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
    },
    "Mistral-7B": {
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-5,
    },
    "Qwen2.5-72B": {
        "vocab_size": 152064,
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6,
    },
    "DeepSeek-V2": {
        **_DEEPSEEK,
        "vocab_size": 102400,
        "hidden_size": 5120,
        "intermediate_size": 12288,
        "num_hidden_layers": 60,
    },
    "DeepSeek-V3": {
        **_DEEPSEEK,
        "vocab_size": 129280,
        "hidden_size": 7168,
        "intermediate_size": 18432,
        "num_hidden_layers": 61,
    },
}
