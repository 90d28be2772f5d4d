"""A transformer's shape, read from a Hugging Face ``config.json``.

Every memory estimate starts from a handful of integers: the hidden size h, the number
of layers L, the attention heads a (and the key/value heads of grouped-query attention),
the MLP width and the vocabulary V. Hugging Face checkpoints ship them in a
``config.json`` whose keys differ between model families; :func:`load_config` reads the
two families the book uses (Llama-style: Llama, Mistral, Qwen; GPT-2-style: GPT-2,
GPT-3) into one flat :class:`ModelConfig` and rejects a config that cannot describe a
transformer, naming the field. Named presets of real models live in
:mod:`aiinfra.memory.presets`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

# Keys of the two config families: (Llama-style key, GPT-2-style key).
_KEYS = {
    "hidden_size": ("hidden_size", "n_embd"),
    "num_layers": ("num_hidden_layers", "n_layer"),
    "num_heads": ("num_attention_heads", "n_head"),
    "vocab_size": ("vocab_size", "vocab_size"),
}


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer, in the book's notation.

    Args:
        hidden_size: h, the width of the residual stream.
        num_layers: L, the number of transformer layers.
        num_heads: a, the attention (query) heads.
        num_kv_heads: key/value heads; ``num_heads`` for MHA, fewer for GQA.
        head_dim: the width of one head, usually ``hidden_size // num_heads``.
        intermediate_size: the MLP width (4h for GPT, about 3.5h for Llama 3).
        vocab_size: V, the rows of the token embedding.
        gated_mlp: True for SwiGLU (three matrices), False for a GELU MLP (two).
        layer_norm: True for LayerNorm (weight and bias), False for RMSNorm (weight).
        bias: whether the linear layers carry biases (GPT yes, Llama no).
        tie_embeddings: whether the output head reuses the token embedding.
        learned_positions: rows of a learned position embedding (0 with RoPE).
        name: a label for tables.
    """

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    gated_mlp: bool = True
    layer_norm: bool = False
    bias: bool = False
    tie_embeddings: bool = False
    learned_positions: int = 0
    name: str = "model"

    def __post_init__(self) -> None:
        for field in ("hidden_size", "num_layers", "num_heads", "num_kv_heads"):
            _check_positive(field, getattr(self, field))
        for field in ("head_dim", "intermediate_size", "vocab_size"):
            _check_positive(field, getattr(self, field))
        _check_positive("learned_positions", self.learned_positions, allow_zero=True)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_kv_heads = {self.num_kv_heads} must divide "
                f"num_heads = {self.num_heads} (each KV head serves a group of heads)"
            )


def _check_positive(field: str, value: Any, allow_zero: bool = False) -> None:
    # bool is a subclass of int: reject it explicitly.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"config field {field!r} must be an integer, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"config field {field!r} must be positive, got {value}")


def _get(cfg: dict[str, Any], field: str, family: int) -> Any:
    key = _KEYS[field][family]  # 0: Llama-style key, 1: GPT-2-style key
    if cfg.get(key) is None:
        raise ValueError(f"config is missing the field {key!r} ({field})")
    return cfg[key]


def load_config(source: str | os.PathLike | dict[str, Any]) -> ModelConfig:
    """Read a Hugging Face style ``config.json`` into a :class:`ModelConfig`.

    A config with ``n_embd`` is read as GPT-2-style (LayerNorm, biases, GELU MLP of
    ``n_inner`` or 4h, learned positions, tied head by default); any other as
    Llama-style (RMSNorm, SwiGLU when ``hidden_act`` is ``silu``, RoPE, untied head
    unless ``tie_word_embeddings``, linear biases only with ``attention_bias``).

    Args:
        source: a path to a ``config.json`` or the parsed dictionary.

    Returns:
        The model's shape.

    Raises:
        ValueError: a required field is missing or a size is not positive, or the
            file is not a JSON object.
        TypeError: a size is not an integer.
    """
    if isinstance(source, dict):
        cfg = source
    else:
        with open(source, encoding="utf-8") as f:
            cfg = json.load(f)
        if not isinstance(cfg, dict):
            raise ValueError(f"{os.fspath(source)} does not hold a JSON object")
    gpt2 = "n_embd" in cfg
    family = 1 if gpt2 else 0
    h, n_layers, n_heads, vocab = (_get(cfg, f, family) for f in _KEYS)
    _check_positive(_KEYS["hidden_size"][family], h)
    _check_positive(_KEYS["num_heads"][family], n_heads)
    if h % n_heads and cfg.get("head_dim") is None:
        raise ValueError(f"num_heads = {n_heads} must divide hidden_size = {h}")
    head_dim = cfg.get("head_dim") or h // n_heads
    name = cfg.get("_name_or_path") or cfg.get("model_type") or "model"
    if gpt2:
        return ModelConfig(
            hidden_size=h,
            num_layers=n_layers,
            num_heads=n_heads,
            num_kv_heads=n_heads,
            head_dim=head_dim,
            intermediate_size=cfg.get("n_inner") or 4 * h,
            vocab_size=vocab,
            gated_mlp=False,
            layer_norm=True,
            bias=True,
            tie_embeddings=cfg.get("tie_word_embeddings", True),
            learned_positions=cfg.get("n_positions", 0),
            name=name,
        )
    if cfg.get("intermediate_size") is None:
        raise ValueError("config is missing the field 'intermediate_size'")
    return ModelConfig(
        hidden_size=h,
        num_layers=n_layers,
        num_heads=n_heads,
        num_kv_heads=cfg.get("num_key_value_heads") or n_heads,
        head_dim=head_dim,
        intermediate_size=cfg["intermediate_size"],
        vocab_size=vocab,
        gated_mlp=cfg.get("hidden_act", "silu") in ("silu", "swish"),
        layer_norm="layer_norm_eps" in cfg or "layer_norm_epsilon" in cfg,
        bias=bool(cfg.get("attention_bias", False)),
        tie_embeddings=cfg.get("tie_word_embeddings", False),
        name=name,
    )
