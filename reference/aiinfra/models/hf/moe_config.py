"""Reading the experts of a mixture-of-experts ``config.json``.

Three families name their experts differently: Mixtral (``num_local_experts`` SwiGLU
experts of width ``intermediate_size`` in every layer, softmax then normalized top-2),
Qwen2-MoE (``num_experts`` of width ``moe_intermediate_size`` plus one shared expert of
``shared_expert_intermediate_size`` behind a sigmoid gate) and DeepSeek-V2/V3
(``n_routed_experts`` and ``n_shared_experts`` of ``moe_intermediate_size`` after
``first_k_dense_replace`` dense layers, group-limited top-K by ``topk_method``, a
``routed_scaling_factor``). An optional field absent from the file takes
transformers' default for that model type; a file without its experts field
describes a dense model. What is not modelled is refused by name: MoE layers interleaved
with dense ones (``decoder_sparse_step``, ``moe_layer_freq``, ``mlp_only_layers``
other than the first layers), another ``scoring_func`` or ``topk_method``, and the
experts of other model types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiinfra.models.hf.config import convert_field, read_fields

MOE_FIELDS = ("n_routed_experts", "num_local_experts", "num_experts")
"""``config.json`` fields that announce routed experts (DeepSeek, Mixtral, Qwen-MoE)."""
# HF model type -> (experts field, expert-width field, routing defaults); missing
# optional fields take transformers' defaults for that model type.
_MOE_TYPES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "mixtral": ("num_local_experts", "intermediate_size", {"norm_topk": True}),
    "qwen2_moe": ("num_experts", "moe_intermediate_size", {"norm_topk": False}),
    "deepseek_v2": (
        "n_routed_experts",
        "moe_intermediate_size",
        {
            "norm_topk": False,
            "scoring": "softmax",
            "method": "greedy",
            "scale": 1.0,
            "shared": 2,
            "first_dense": 0,
        },
    ),
    "deepseek_v3": (
        "n_routed_experts",
        "moe_intermediate_size",
        {
            "norm_topk": True,
            "scoring": "sigmoid",
            "method": "noaux_tc",
            "scale": 2.5,
            "shared": 1,
            "first_dense": 3,
        },
    ),
}
# DeepSeek's topk_method -> how groups are scored (None: no group limit).
_TOPK_METHODS = {"greedy": None, "group_limited_greedy": "max", "noaux_tc": "top2"}


def moe_kwargs(source: Mapping[str, Any]) -> dict[str, Any]:
    """The mixture-of-experts fields of :class:`TransformerConfig`; ``{}`` if dense.

    Raises:
        ValueError: a required MoE field is missing or malformed, the model type's
            experts are not modelled, or the config asks for what is not modelled
            (interleaved dense layers, another scoring function or top-k method).
    """
    model_type = source.get("model_type")
    if model_type not in _MOE_TYPES:
        for key in MOE_FIELDS:
            if source.get(key):
                raise ValueError(
                    f"config field {key!r} announces experts, but the experts of "
                    f"model_type {model_type!r} are not modelled (only "
                    f"{sorted(_MOE_TYPES)})"
                )
        return {}
    experts_key, width_key, defaults = _MOE_TYPES[model_type]
    if not source.get(experts_key):  # absent, null or 0: every layer is dense
        return {}
    n_dense = source.get("first_k_dense_replace", defaults.get("first_dense", 0))
    n_layers = source.get("num_hidden_layers")
    if isinstance(n_dense, int) and isinstance(n_layers, int) and n_dense >= n_layers:
        return {}  # every layer is one of the first dense ones: no MoE layer
    moe = read_fields(
        source,
        {
            experts_key: ("n_experts", int, True),
            "num_experts_per_tok": ("top_k", int, True),
            width_key: ("d_expert", int, True),
        },
    )
    norm = source.get("norm_topk_prob")
    moe["norm_topk"] = defaults["norm_topk"] if norm is None else norm
    convert_field("norm_topk_prob", moe["norm_topk"], bool)
    if model_type == "qwen2_moe":
        moe.update(_qwen2_moe_kwargs(source))
    elif model_type.startswith("deepseek"):
        moe.update(_deepseek_moe_kwargs(source, defaults))
    return moe


def _qwen2_moe_kwargs(source: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen2-MoE: one shared expert of its own width behind a sigmoid gate."""
    if source.get("decoder_sparse_step", 1) != 1:
        raise ValueError(
            f"config field 'decoder_sparse_step' is {source['decoder_sparse_step']!r}"
            ": only 1 (every layer MoE) is modelled"
        )
    dense = list(source.get("mlp_only_layers") or [])
    if dense != list(range(len(dense))):
        raise ValueError(
            f"config field 'mlp_only_layers' is {dense!r}: only the first layers "
            "(0, 1, ..., k-1) can be dense in this model"
        )
    width = read_fields(source, {"shared_expert_intermediate_size": ("d", int, True)})
    return {
        "n_shared": 1,
        "d_shared": width["d"],
        "shared_gate": True,
        "first_dense_layers": len(dense),
    }


def _deepseek_moe_kwargs(
    source: Mapping[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """DeepSeek-V2/V3: shared experts, dense first layers, group-limited top-K."""
    kwargs = read_fields(
        source,
        {
            "n_shared_experts": ("n_shared", int, False),
            "first_k_dense_replace": ("first_dense_layers", int, False),
            "routed_scaling_factor": ("routed_scale", float, False),
        },
    )
    kwargs.setdefault("routed_scale", defaults["scale"])
    kwargs.setdefault("n_shared", defaults["shared"])
    kwargs.setdefault("first_dense_layers", defaults["first_dense"])
    if source.get("moe_layer_freq", 1) != 1:
        raise ValueError(
            f"config field 'moe_layer_freq' is {source['moe_layer_freq']!r}: only 1 "
            "(every layer after first_k_dense_replace is MoE) is modelled"
        )
    kwargs["router"] = source.get("scoring_func") or defaults["scoring"]
    if kwargs["router"] not in ("softmax", "sigmoid"):
        raise ValueError(
            f"config field 'scoring_func' is {kwargs['router']!r}; one of "
            "('softmax', 'sigmoid') is modelled"
        )
    method = source.get("topk_method") or defaults["method"]
    if method not in _TOPK_METHODS:
        raise ValueError(
            f"config field 'topk_method' is {method!r}; one of "
            f"{tuple(_TOPK_METHODS)} is modelled"
        )
    if _TOPK_METHODS[method] is not None:
        groups = read_fields(
            source,
            {
                "n_group": ("n_groups", int, True),
                "topk_group": ("topk_groups", int, True),
            },
        )
        kwargs.update(groups, group_score=_TOPK_METHODS[method])
    return kwargs
