"""A flat model configuration that a Hugging Face ``config.json`` can fill.

Every decoder of this book is described by a dozen integers: the width ``d_model``,
the depth ``n_layers``, the query heads ``n_heads`` and the key/value heads
``n_kv_heads`` (MHA when equal, MQA when 1, GQA in between; Ainslie et al. 2023), the
head dimension, the MLP width ``d_ff``, the vocabulary and the position table. Models
with multi-head latent attention (DeepSeek-V2, Sec. 2.1) add the latent widths
``kv_lora_rank`` (d_c), ``q_lora_rank`` (d_c') and the decoupled RoPE width
``rope_head_dim`` (d_h^R). A few switches say which pieces a layer is built from: the
Llama family (RMSNorm, SwiGLU, RoPE, no biases; Qwen2 adds query/key/value biases;
Mistral a sliding window) or the GPT-2/GPT-3 family (LayerNorm, a GELU MLP, learned
positions, biases everywhere). Mixture-of-experts models (Mixtral, Qwen-MoE,
DeepSeek-V2/V3) replace the MLP of every layer after the first ``first_dense_layers``
by ``E`` routed SwiGLU experts of width ``d_e``, ``K`` per token, plus ``E_s`` shared
ones; the routing switches are those of :class:`~aiinfra.models.moe.spec.MoESpec`,
under the same names. :meth:`TransformerConfig.from_hf_config` maps the
Hugging Face names onto these (:mod:`aiinfra.models.hf.config`,
:mod:`aiinfra.models.hf.moe_config`) and rejects a missing
or malformed field, or one this package does not model, by name. The configs of
released models are in :mod:`aiinfra.models.presets`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from aiinfra import checks
from aiinfra.models.hf import config as hf_config
from aiinfra.models.hf import moe_config as hf_moe_config
from aiinfra.models.moe.spec import MoESpec

NORMS = ("rmsnorm", "layernorm")
MLPS = ("swiglu", "gelu")
POSITIONS = ("rope", "learned")


@dataclass
class TransformerConfig:
    """Shape of a decoder-only Transformer; defaults give a toy model for tests.

    ``n_kv_heads`` and ``head_dim`` default (``None``) to ``n_heads`` and
    ``d_model // n_heads``; after construction both are integers.

    Raises:
        ValueError: a size is not a positive integer, ``n_heads`` is not divisible by
            ``n_kv_heads``, ``d_model`` by ``n_heads`` (when ``head_dim`` is not
            given), a RoPE width is odd, a switch has an unknown value, or a
            mixture-of-experts field is out of range (:class:`MoESpec` names it),
            set without ``n_experts``, or combined with a GELU MLP or biases.
    """

    vocab_size: int = 256  # one token per byte: no tokenizer needed in examples
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int | None = None  # None: one KV head per query head (MHA)
    head_dim: int | None = None  # None: d_model // n_heads
    d_ff: int = 176  # about (8/3) d_model: SwiGLU at the parameters of a 4d MLP
    max_seq_len: int = 128  # rows of the position table; longer inputs are rejected
    rope_theta: float = 10000.0  # RoFormer's base
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    kv_lora_rank: int = 0  # d_c of MLA; 0 selects GQA/MHA/MQA attention
    q_lora_rank: int = 0  # d_c' of MLA; 0 means queries are not compressed
    rope_head_dim: int = 0  # d^R of MLA's decoupled RoPE query and key
    norm: str = "rmsnorm"  # or "layernorm" (GPT-2/3: weight and bias)
    mlp: str = "swiglu"  # or "gelu" (GPT-2/3: two matrices)
    position: str = "rope"  # or "learned" (GPT-2/3: a max_seq_len x d table)
    bias: bool = False  # every linear layer has a bias (GPT-2/3)
    qkv_bias: bool = False  # the query, key and value projections have biases (Qwen2)
    sliding_window: int = 0  # a query sees this many latest keys (Mistral); 0: all
    # Mixture of experts: the fields of MoESpec, same names; n_experts = 0 is dense.
    n_experts: int = 0  # E routed experts per MoE layer; 0: every MLP is dense
    top_k: int = 0  # K routed experts per token (not a sampling top-k)
    d_expert: int = 0  # d_e, each routed expert's SwiGLU width (d_ff stays dense)
    n_shared: int = 0  # E_s shared experts every token passes through (DeepSeekMoE)
    d_shared: int | None = None  # their joint width; None: n_shared * d_expert
    shared_gate: bool = False  # shared output scaled by sigmoid(w^T x) (Qwen-MoE)
    router: str = "softmax"  # or "sigmoid" of each logit (DeepSeek-V3)
    norm_topk: bool = True  # the K gate weights are divided by their sum
    routed_scale: float = 1.0  # DeepSeek's routed_scaling_factor
    n_groups: int = 1  # expert groups of group-limited routing (1: no limit)
    topk_groups: int = 1  # a token's experts come from this many groups
    group_score: str = "max"  # group rank: "max" (DeepSeek-V2) or "top2" (V3)
    capacity_factor: float | None = None  # None: experts take every token
    first_dense_layers: int = 0  # DeepSeek's first_k_dense_replace: dense, then MoE

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "d_ff"):
            checks.positive_int(name, getattr(self, name))
        checks.positive_int("max_seq_len", self.max_seq_len)
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        checks.positive_int("n_kv_heads", self.n_kv_heads)
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
        checks.positive_int("head_dim", self.head_dim)
        for name in ("kv_lora_rank", "q_lora_rank", "rope_head_dim", "sliding_window"):
            checks.non_negative_int(name, getattr(self, name))
        for name, allowed in (
            ("norm", NORMS),
            ("mlp", MLPS),
            ("position", POSITIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"{name} must be one of {allowed}, got {getattr(self, name)!r}"
                )
        for name in ("tie_embeddings", "bias", "qkv_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.is_mla and self.position != "rope":
            raise ValueError("MLA (kv_lora_rank > 0) needs position='rope'")
        if self.position == "rope":
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
        self._check_moe()

    def _check_moe(self) -> None:
        """MoESpec checks the routing fields; dense configs keep their defaults."""
        if checks.non_negative_int("n_experts", self.n_experts) == 0:
            for f in fields(self):
                if f.name in _MOE_FIELDS and getattr(self, f.name) != f.default:
                    raise ValueError(
                        f"{f.name} is {getattr(self, f.name)!r} but n_experts is 0: "
                        "the mixture-of-experts fields need n_experts > 0"
                    )
            return
        self.moe_spec()  # raises ValueError naming the field
        if self.mlp != "swiglu" or self.bias:
            raise ValueError(
                "n_experts > 0 needs mlp='swiglu' and bias=False: the experts of "
                "the modelled MoE models are SwiGLU MLPs without biases"
            )
        checks.int_in("first_dense_layers", self.first_dense_layers, 0, self.n_layers)

    @property
    def is_moe(self) -> bool:
        """Whether some layers are mixture-of-experts layers."""
        return self.n_experts > 0 and self.first_dense_layers < self.n_layers

    def moe_spec(self) -> MoESpec | None:
        """The MoE layers' routing and expert shapes; ``None`` for a dense model.

        Raises:
            ValueError: a MoE field is out of range (the message names it).
        """
        if self.n_experts == 0:
            return None
        return MoESpec(**{name: getattr(self, name) for name in _SPEC_FIELDS})

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` (0-based) has experts instead of a dense MLP.

        Raises:
            ValueError: ``i`` is not an integer in ``[0, n_layers)``.
        """
        checks.int_in("i", i, 0, self.n_layers - 1)
        return self.n_experts > 0 and i >= self.first_dense_layers

    @property
    def n_moe_layers(self) -> int:
        """How many layers are MoE layers (0 for a dense model)."""
        return self.n_layers - self.first_dense_layers if self.n_experts else 0

    @property
    def is_mla(self) -> bool:
        """Whether the layers use multi-head latent attention."""
        return self.kv_lora_rank > 0

    @classmethod
    def from_hf_config(
        cls, source: Mapping[str, Any] | str | os.PathLike
    ) -> TransformerConfig:
        """Build a config from a Hugging Face ``config.json`` (a dict or a path).

        Both families of :mod:`aiinfra.models.hf.config` are read (Llama-style and
        GPT-2-style), and both RoPE layouts (top-level ``rope_theta`` of
        transformers 4, ``rope_parameters`` of transformers 5). Keys that do not
        change the computation (``torch_dtype``, ``architectures``, the balancing
        losses' weights) are ignored. The experts of Mixtral, Qwen2-MoE and
        DeepSeek-V2/V3 are read (:func:`~aiinfra.models.hf.moe_config.moe_kwargs`).
        For MLA models the head dimension is ``qk_nope_head_dim``, and
        ``v_head_dim`` must equal it.

        Args:
            source: the parsed JSON object, or the path of the file.

        Returns:
            The config.

        Raises:
            ValueError: a required field is missing, a field has the wrong type or
                value, the fields are inconsistent (see :class:`TransformerConfig`),
                or the config asks for what is not modelled (scaled RoPE, other
                activations, biases on every attention projection, MoE layers
                interleaved with dense ones).
            FileNotFoundError: ``source`` is a path that does not exist.
        """
        obj = hf_config.read_json_object(source)
        return cls(**hf_config.config_kwargs(obj), **hf_moe_config.moe_kwargs(obj))


_SPEC_FIELDS = tuple(f for f in MoESpec.__dataclass_fields__)
_MOE_FIELDS = (*_SPEC_FIELDS, "first_dense_layers")
