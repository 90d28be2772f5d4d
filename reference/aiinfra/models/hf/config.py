"""Reading a Hugging Face ``config.json`` into :class:`TransformerConfig` fields.

Two families of ``config.json`` describe the decoders of this book:

- GPT-2 style (``n_embd``, ``n_layer``, ``n_head``; GPT-2 and GPT-3): LayerNorm,
  biases on every linear layer, a GELU MLP of ``n_inner`` (default ``4 d``), learned
  position embeddings of ``n_positions`` rows and, by default, a tied output head.
- Llama style (``hidden_size``, ``num_hidden_layers``, ...; Llama, Mistral, Qwen2,
  DeepSeek-V2/V3 attention): RMSNorm, a SwiGLU MLP, RoPE and no biases, except the
  query, key and value biases of Qwen2.

The RoPE base moved between library versions: configs written by transformers 4 keep
``rope_theta`` at the top level (and a ``rope_scaling`` object for scaled variants);
transformers 5 writes ``rope_parameters = {"rope_type": ..., "rope_theta": ...}``.
Both are read. What this package does not model is refused by name instead of being
ignored: a RoPE type other than ``default`` (Llama 3.1's ``llama3``, YaRN with its
``mscale``, linear or dynamic NTK scaling), an activation other than SiLU in a
Llama-style model, biases on the attention output or the MLP, and Qwen2's
layer-dependent sliding window. The experts of mixture-of-experts models are read by
:mod:`aiinfra.models.hf.moe_config`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

# region hf-fields
# Hugging Face name -> (our field, expected type, required), Llama-style configs.
HF_FIELDS: dict[str, tuple[str, type, bool]] = {
    "vocab_size": ("vocab_size", int, True),
    "hidden_size": ("d_model", int, True),
    "num_hidden_layers": ("n_layers", int, True),
    "num_attention_heads": ("n_heads", int, True),
    "intermediate_size": ("d_ff", int, True),
    "num_key_value_heads": ("n_kv_heads", int, False),
    "head_dim": ("head_dim", int, False),
    "max_position_embeddings": ("max_seq_len", int, False),
    "rms_norm_eps": ("norm_eps", float, False),
    "tie_word_embeddings": ("tie_embeddings", bool, False),
    "kv_lora_rank": ("kv_lora_rank", int, False),
    "q_lora_rank": ("q_lora_rank", int, False),
    "qk_rope_head_dim": ("rope_head_dim", int, False),
}
# endregion
# GPT-2-style configs (GPT-2, GPT-3).
GPT2_FIELDS: dict[str, tuple[str, type, bool]] = {
    "vocab_size": ("vocab_size", int, True),
    "n_embd": ("d_model", int, True),
    "n_layer": ("n_layers", int, True),
    "n_head": ("n_heads", int, True),
    "n_inner": ("d_ff", int, False),
    "n_positions": ("max_seq_len", int, False),
    "layer_norm_epsilon": ("norm_eps", float, False),
    "tie_word_embeddings": ("tie_embeddings", bool, False),
}
_ZERO_ALLOWED = (
    "kv_lora_rank",
    "q_lora_rank",
    "first_k_dense_replace",
    "n_shared_experts",
)
_SILU = ("silu", "swish")
_GELU = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def read_json_object(source: Mapping[str, Any] | str | os.PathLike) -> Mapping:
    """The parsed ``config.json``: ``source`` itself, or the file at that path.

    Raises:
        ValueError: the JSON value is not an object.
        FileNotFoundError: ``source`` is a path that does not exist.
    """
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8") as f:
            source = json.load(f)
    if not isinstance(source, Mapping):
        raise ValueError(f"config must be a JSON object, got {type(source).__name__}")
    return source


def config_kwargs(source: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword arguments of :class:`TransformerConfig` for a parsed ``config.json``.

    Raises:
        ValueError: a required field is missing, a field has the wrong type or value,
            or the config asks for something this package does not model.
    """
    if "n_embd" in source or source.get("model_type") == "gpt2":
        return _gpt2_kwargs(source)
    kwargs = read_fields(source, HF_FIELDS)
    activation = source.get("hidden_act", "silu")
    if activation not in _SILU:
        raise ValueError(
            f"config field 'hidden_act' is {activation!r}: a Llama-style model is "
            f"modelled with a SwiGLU MLP, which needs one of {_SILU}"
        )
    for key in ("attention_bias", "mlp_bias"):
        if source.get(key):
            raise ValueError(
                f"config field {key!r} is true: biases on every attention projection "
                "or on the MLP are not modelled (only Qwen2's q/k/v biases are)"
            )
    if source.get("model_type") in ("qwen2", "qwen2_moe"):
        # Qwen2's q, k and v projections carry biases (Qwen2-MoE: its qkv_bias)
        qkv_bias = source.get("qkv_bias", True)
        kwargs["qkv_bias"] = convert_field("qkv_bias", qkv_bias, bool)
        if source.get("use_sliding_window"):
            raise ValueError(
                "config field 'use_sliding_window' is true: Qwen2's sliding window "
                "on some layers only is not modelled"
            )
    elif source.get("sliding_window") is not None:
        kwargs["sliding_window"] = convert_field(
            "sliding_window", source["sliding_window"], int
        )
    theta = rope_theta(source)
    if theta is not None:
        kwargs["rope_theta"] = theta
    if kwargs.get("kv_lora_rank"):
        kwargs["head_dim"] = _mla_head_dim(source)
        # MLA has no key/value heads to group: every head reads the one latent.
        # transformers' DeepseekV3Config defaults num_key_value_heads to 128
        # whatever the head count, so the field says nothing here.
        kwargs.pop("n_kv_heads", None)
    return kwargs


def rope_theta(source: Mapping[str, Any]) -> float | None:
    """The RoPE base of either layout; ``None`` when the config gives none.

    Raises:
        ValueError: a RoPE type other than ``default``, a malformed RoPE object, or
            two layouts that disagree.
    """
    params = source.get("rope_parameters")
    scaling = source.get("rope_scaling")
    theta = source.get("rope_theta")
    for key, obj in (("rope_parameters", params), ("rope_scaling", scaling)):
        if obj is None:
            continue
        if not isinstance(obj, Mapping):
            raise ValueError(f"config field {key!r} must be an object, got {obj!r}")
        kind = obj.get("rope_type", obj.get("type", "default"))
        if kind != "default":
            raise ValueError(
                f"config field {key!r} asks for RoPE type {kind!r}; only 'default' "
                "(unscaled RoPE) is modelled: scaled variants (llama3, yarn with its "
                "mscale, linear, dynamic) would give other logits"
            )
        if "rope_theta" in obj:
            inner = convert_field(f"{key}.rope_theta", obj["rope_theta"], float)
            if theta is not None and convert_field("rope_theta", theta, float) != inner:
                raise ValueError(
                    f"config fields 'rope_theta' ({theta}) and '{key}.rope_theta' "
                    f"({inner}) disagree"
                )
            theta = inner
    return None if theta is None else convert_field("rope_theta", theta, float)


def _gpt2_kwargs(source: Mapping[str, Any]) -> dict[str, Any]:
    kwargs = read_fields(source, GPT2_FIELDS)
    activation = source.get("activation_function", "gelu_new")
    if activation not in _GELU:
        raise ValueError(
            f"config field 'activation_function' is {activation!r}; a GPT-2-style "
            f"model is modelled with a GELU MLP, one of {_GELU}"
        )
    kwargs.setdefault("d_ff", 4 * kwargs["d_model"])
    kwargs.setdefault("tie_embeddings", True)  # GPT-2 ties its head
    kwargs.update(norm="layernorm", mlp="gelu", bias=True, position="learned")
    return kwargs


def _mla_head_dim(source: Mapping[str, Any]) -> int:
    for key in ("qk_nope_head_dim", "qk_rope_head_dim"):
        if source.get(key) is None:
            raise ValueError(f"config field {key!r} is missing (MLA needs it)")
    head_dim = convert_field("qk_nope_head_dim", source["qk_nope_head_dim"], int)
    v_head_dim = source.get("v_head_dim", head_dim)
    if v_head_dim != head_dim:
        raise ValueError(
            f"config field 'v_head_dim' ({v_head_dim}) must equal "
            f"'qk_nope_head_dim' ({head_dim}) in this model"
        )
    return head_dim


def read_fields(
    source: Mapping[str, Any], table: dict[str, tuple[str, type, bool]]
) -> dict[str, Any]:
    """Our fields from the Hugging Face fields of ``table``, checked.

    Args:
        source: the parsed ``config.json``.
        table: Hugging Face name -> (our name, expected type, required).

    Returns:
        Our name -> value for every field present and not null.

    Raises:
        ValueError: a required field is missing, or a value has the wrong type
            or is not positive.
    """
    kwargs: dict[str, Any] = {}
    for key, (name, kind, required) in table.items():
        value = source.get(key)
        if value is None:  # absent, or null as in DeepSeek-V2-Lite's q_lora_rank
            if required:
                raise ValueError(f"config field {key!r} is missing")
            continue
        kwargs[name] = convert_field(key, value, kind)
    return kwargs


def convert_field(key: str, value: Any, kind: type) -> Any:
    """Check one JSON value against its expected type; ints are valid floats."""
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        if value <= 0 and key not in _ZERO_ALLOWED:
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
