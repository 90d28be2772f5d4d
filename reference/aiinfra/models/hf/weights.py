"""Hugging Face tensor names and layouts -> this package's: rename, split, permute.

Loading a checkpoint renames each tensor (``model.layers.N.self_attn.q_proj.weight``
becomes ``blocks.N.attn.wq.weight``), splits DeepSeek's fused MLA matrices per head
into this package's ``W^UQ, W^QR, W^DKV, W^KR, W^UK, W^UV`` (DeepSeek-V2, Eqs.
9-15), transposes GPT-2's ``Conv1D`` weights, and reorders query and key rows for
RoPE. This package rotates the pairs ``(x_{2i}, x_{2i+1})`` as RoFormer's Eq. 34
writes them; Hugging Face's Llama-family code rotates ``(x_i, x_{i + d/2})``
("rotate half"), both by the angle ``m theta_i``. Moving row ``i + d/2`` of every
head of ``W_q`` and ``W_k`` next to row ``i`` turns one layout into the other
exactly, and leaves ``q . k`` unchanged since both sides move alike. DeepSeek-V2's
code rotates interleaved pairs (as complex numbers), and so does V3's with
``rope_interleave`` (its default): those rows are taken as they are. A MoE layer's
router, experts and shared experts are stored one matrix per expert on the Hub
(Mixtral under ``block_sparse_moe`` with ``w1, w3, w2``; Qwen-MoE and DeepSeek under
``mlp`` with ``gate_proj, up_proj, down_proj``) and keep their layout. Every tensor is
taken once, its shape checked against the config; what is missing, misshapen or
left over is an error naming the tensor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from aiinfra.models.config import TransformerConfig

# Hugging Face's rotate-half RoPE
ROTATE_HALF = ("llama", "mistral", "qwen2", "mixtral", "qwen2_moe")
_SWIGLU = (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2"))
_NOT_WEIGHTS = ("rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias")  # buffers


def rotate_half_to_interleaved(w: Tensor, head_dim: int) -> Tensor:
    """Reorder the rows of a query or key projection from rotate-half to pairs.

    In each head, row ``i`` and row ``i + d/2`` of ``w`` become rows ``2i`` and
    ``2i + 1``: the two features that Hugging Face's RoPE rotates together become
    the adjacent pair that this package's :class:`RotaryEmbedding` rotates.

    Args:
        w: a weight ``(heads * d, d_in)`` or a bias ``(heads * d,)``.
        head_dim: ``d``, the rotated width of one head.

    Returns:
        The permuted tensor, same shape.
    """
    halves = w.unflatten(0, (-1, 2, head_dim // 2))  # (heads, 2, D/2, ...)
    pairs = halves.transpose(1, 2)  # (heads, D/2, 2, ...): rows i, i + D/2 adjacent
    return pairs.flatten(0, 2)  # (heads * D, ...)


class _Tensors:
    """The checkpoint's tensors by name, each taken once, its shape checked."""

    def __init__(self, tensors: Mapping[str, Tensor]) -> None:
        self.left = {k: v for k, v in tensors.items() if not k.endswith(_NOT_WEIGHTS)}

    def take(self, name: str, *shape: int) -> Tensor:
        if name not in self.left:
            raise ValueError(f"the checkpoint lacks tensor {name!r}")
        t = self.left.pop(name)
        if tuple(t.shape) != shape:
            raise ValueError(
                f"tensor {name!r} has shape {tuple(t.shape)}, the config implies "
                f"{shape}"
            )
        return t

    def check_all_taken(self) -> None:
        if self.left:
            raise ValueError(
                f"unexpected tensors in the checkpoint: {sorted(self.left)}"
            )


def _attention(src: _Tensors, p: str, c: TransformerConfig, half: bool) -> dict:
    """GQA tensors of layer prefix ``p`` (``model.layers.N.self_attn.``)."""
    d, H, G, D = c.d_model, c.n_heads, c.n_kv_heads, c.head_dim
    rope = (lambda w: rotate_half_to_interleaved(w, D)) if half else (lambda w: w)
    out = {
        "wq.weight": rope(src.take(p + "q_proj.weight", H * D, d)),
        "wk.weight": rope(src.take(p + "k_proj.weight", G * D, d)),
        "wv.weight": src.take(p + "v_proj.weight", G * D, d),
        "wo.weight": src.take(p + "o_proj.weight", d, H * D),
    }
    if c.qkv_bias:
        out["wq.bias"] = rope(src.take(p + "q_proj.bias", H * D))
        out["wk.bias"] = rope(src.take(p + "k_proj.bias", G * D))
        out["wv.bias"] = src.take(p + "v_proj.bias", G * D)
    return out


def _latent_attention(src: _Tensors, p: str, c: TransformerConfig, half: bool) -> dict:
    """MLA tensors of layer prefix ``p``, split per head into this package's."""
    d, H, d_h = c.d_model, c.n_heads, c.head_dim
    d_c, d_cq, d_r = c.kv_lora_rank, c.q_lora_rank, c.rope_head_dim
    rope = (lambda w: rotate_half_to_interleaved(w, d_r)) if half else (lambda w: w)
    out = {}
    if d_cq:
        out["w_dq.weight"] = src.take(p + "q_a_proj.weight", d_cq, d)
        out["q_norm.weight"] = src.take(p + "q_a_layernorm.weight", d_cq)
        q = src.take(p + "q_b_proj.weight", H * (d_h + d_r), d_cq)
    else:
        q = src.take(p + "q_proj.weight", H * (d_h + d_r), d)
    q = q.unflatten(0, (H, d_h + d_r))  # (H, d_h + d_h^R, d_c'): per head [q^C; q^R]
    out["w_uq.weight"] = q[:, :d_h].flatten(0, 1)  # (H d_h, d_c')
    out["w_qr.weight"] = rope(q[:, d_h:].flatten(0, 1))  # (H d_h^R, d_c')
    kv_a = src.take(p + "kv_a_proj_with_mqa.weight", d_c + d_r, d)  # [c^KV; k^R]
    out["w_dkv.weight"], out["w_kr.weight"] = kv_a[:d_c], rope(kv_a[d_c:])
    out["kv_norm.weight"] = src.take(p + "kv_a_layernorm.weight", d_c)
    kv_b = src.take(p + "kv_b_proj.weight", H * 2 * d_h, d_c)
    kv_b = kv_b.unflatten(0, (H, 2 * d_h))  # (H, 2 d_h, d_c): per head [k^C; v^C]
    out["w_uk.weight"] = kv_b[:, :d_h].flatten(0, 1)  # (H d, d_c)
    out["w_uv.weight"] = kv_b[:, d_h:].flatten(0, 1)  # (H d, d_c)
    out["w_o.weight"] = src.take(p + "o_proj.weight", d, H * d_h)
    return out


def _swiglu(
    src: _Tensors, p: str, d: int, f: int, names: tuple = _SWIGLU
) -> dict[str, Tensor]:
    """``w1, w3, w2`` of one SwiGLU of width ``f`` from prefix ``p``."""
    out = {}
    for theirs, ours in names:
        shape = (d, f) if ours == "w2" else (f, d)
        out[ours + ".weight"] = src.take(p + theirs + ".weight", *shape)
    return out


def _experts(src: _Tensors, p: str, c: TransformerConfig, kind: str) -> dict:
    """A MoE layer's tensors under layer prefix ``p`` (``model.layers.N.``)."""
    spec, d = c.moe_spec(), c.d_model
    E, f = spec.n_experts, spec.d_expert
    mixtral = kind == "mixtral"
    p += "block_sparse_moe." if mixtral else "mlp."
    names = tuple((x, x) for x in ("w1", "w3", "w2")) if mixtral else _SWIGLU
    out = {"router.weight": src.take(p + "gate.weight", E, d)}  # W_r, (E, h)
    for j in range(E):
        expert = _swiglu(src, f"{p}experts.{j}.", d, f, names)
        out.update({f"experts.{j}.{k}": v for k, v in expert.items()})
    if spec.n_shared:
        shared = "shared_expert." if kind == "qwen2_moe" else "shared_experts."
        expert = _swiglu(src, p + shared, d, spec.shared_width)
        out.update({f"shared.{k}": v for k, v in expert.items()})
    if spec.shared_gate:
        out["shared_gate.weight"] = src.take(p + "shared_expert_gate.weight", 1, d)
    bias = p + "gate.e_score_correction_bias"  # DeepSeek-V3's balancing bias b
    has_bias = bias in src.left
    out["expert_bias"] = src.take(bias, E) if has_bias else torch.zeros(E)
    return out


def _llama_state(src: _Tensors, c: TransformerConfig, hf: Mapping[str, Any]) -> dict:
    """This package's state dict from Llama, Mistral, Qwen2, their MoE or DeepSeek."""
    d, V, f = c.d_model, c.vocab_size, c.d_ff
    kind = hf["model_type"]
    half = kind in ROTATE_HALF or (
        kind == "deepseek_v3" and hf.get("rope_interleave", True) is False
    )
    attention = _latent_attention if c.is_mla else _attention
    state = {
        "embed.weight": src.take("model.embed_tokens.weight", V, d),
        "norm.weight": src.take("model.norm.weight", d),
    }
    for i in range(c.n_layers):
        p, ours = f"model.layers.{i}.", f"blocks.{i}."
        attn = attention(src, p + "self_attn.", c, half)
        state.update({ours + "attn." + k: v for k, v in attn.items()})
        state[ours + "attn_norm.weight"] = src.take(p + "input_layernorm.weight", d)
        state[ours + "mlp_norm.weight"] = src.take(
            p + "post_attention_layernorm.weight", d
        )
        if c.is_moe_layer(i):
            mlp = _experts(src, p, c, kind)
        else:
            mlp = _swiglu(src, p + "mlp.", d, f)
        state.update({ours + "mlp." + k: v for k, v in mlp.items()})
    return state


def _gpt2_state(src: _Tensors, c: TransformerConfig) -> dict:
    """This package's state dict from GPT-2 tensors (``Conv1D`` stores ``W^T``)."""
    d, V, f = c.d_model, c.vocab_size, c.d_ff
    state = {
        "embed.weight": src.take("transformer.wte.weight", V, d),
        "pos_embed.weight": src.take("transformer.wpe.weight", c.max_seq_len, d),
        "norm.weight": src.take("transformer.ln_f.weight", d),
        "norm.bias": src.take("transformer.ln_f.bias", d),
    }
    for i in range(c.n_layers):
        p, ours = f"transformer.h.{i}.", f"blocks.{i}."
        for theirs, mine in (("ln_1", "attn_norm"), ("ln_2", "mlp_norm")):
            state[ours + mine + ".weight"] = src.take(p + theirs + ".weight", d)
            state[ours + mine + ".bias"] = src.take(p + theirs + ".bias", d)
        qkv_w = src.take(p + "attn.c_attn.weight", d, 3 * d).T  # (3d, d): [Wq; Wk; Wv]
        qkv_b = src.take(p + "attn.c_attn.bias", 3 * d)
        for j, name in enumerate(("wq", "wk", "wv")):
            state[ours + f"attn.{name}.weight"] = qkv_w[j * d : (j + 1) * d]
            state[ours + f"attn.{name}.bias"] = qkv_b[j * d : (j + 1) * d]
        for theirs, mine, shape in (
            ("attn.c_proj", "attn.wo", (d, d)),
            ("mlp.c_fc", "mlp.w1", (d, f)),
            ("mlp.c_proj", "mlp.w2", (f, d)),
        ):
            state[ours + mine + ".weight"] = src.take(p + theirs + ".weight", *shape).T
            state[ours + mine + ".bias"] = src.take(p + theirs + ".bias", shape[1])
    return state


def convert_state_dict(
    tensors: Mapping[str, Tensor], config: TransformerConfig, hf: Mapping[str, Any]
) -> dict[str, Tensor]:
    """Rename, split and permute a checkpoint's tensors into this package's names.

    Args:
        tensors: the checkpoint's tensors by Hugging Face name.
        config: the model's config (read from ``hf``).
        hf: the parsed ``config.json``.

    Returns:
        A state dict for :class:`Transformer`, ``head.weight`` included.

    Raises:
        ValueError: a tensor is missing, has the wrong shape or is unexpected, or a
            tied head stored in the checkpoint differs from the embedding.
    """
    src = _Tensors(tensors)
    if hf["model_type"] == "gpt2":
        state, embed = _gpt2_state(src, config), "transformer.wte.weight"
    else:
        state, embed = _llama_state(src, config, hf), "model.embed_tokens.weight"
    shape = (config.vocab_size, config.d_model)
    if not config.tie_embeddings:
        state["head.weight"] = src.take("lm_head.weight", *shape)
    else:  # the head is the embedding; a checkpoint may store it twice
        head = (
            src.take("lm_head.weight", *shape) if "lm_head.weight" in src.left else None
        )
        if head is not None and not torch.equal(head, state["embed.weight"]):
            raise ValueError(
                f"config ties the head, but 'lm_head.weight' differs from {embed!r}"
            )
        state["head.weight"] = state["embed.weight"]
    src.check_all_taken()
    return state
