"""Counting the parameters of a decoder from its config, part by part.

A decoder-only Transformer is a token embedding (``V d``; GPT-2 and GPT-3 add a
learned position table of ``max_seq_len x d``), ``L`` identical layers, a final norm
and an output head that is its own ``V x d`` matrix or the embedding reused (tied).
Each layer holds the attention projections (``W_q`` of ``H D`` columns, ``W_k`` and
``W_v`` of ``G D`` each with ``G`` key/value heads, ``W_o``; MLA's down- and
up-projections instead, DeepSeek-V2 Sec. 2.1), an MLP (three ``d x d_ff`` matrices
for SwiGLU, two for a GELU MLP) and two norms (``d`` gains for RMSNorm, ``d`` gains
and ``d`` biases for LayerNorm). Biases: GPT-2/3 put one on every linear layer of a
block (the head has none); Qwen2 on its query, key and value projections only. A
mixture-of-experts layer holds, in place of the MLP, a router (``E h``), ``E`` routed
SwiGLU experts (``3 h d_e`` each), the shared experts (``3 h d_s``) and Qwen-MoE's
shared gate (``h``); a token runs through ``K`` of the ``E``, so the parameters it
*activates* are the total less ``E - K`` experts per MoE layer. The total is the
``Psi`` of every memory formula and the ``N`` of FLOP counts; the tests hold it
against the published totals of released checkpoints and against ``numel()`` of
independent implementations built from the same config.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.models.config import TransformerConfig


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, by part (counts, not bytes).

    Attributes:
        embedding: the token embedding plus the learned position table, if any.
        attention: the attention projections of all layers, biases included.
        mlp: the MLP matrices of all layers, biases included.
        norms: the two norms of every layer (and MLA's latent norms), and the final
            norm.
        head: the output projection; 0 when tied to the embedding.
    """

    embedding: int
    attention: int
    mlp: int
    norms: int
    head: int

    @property
    def total(self) -> int:
        """All parameters, a tied matrix counted once: ``Psi``."""
        return self.embedding + self.attention + self.mlp + self.norms + self.head


def attention_matmul_parameters(c: TransformerConfig) -> int:
    """Weights of one layer's attention projections (no biases, no norm gains).

    Args:
        c: the model.

    Returns:
        ``h H d + 2 h G d + H d h`` for MHA/GQA/MQA (``W_q, W_k, W_v, W_o``); for
        MLA the sum of ``W^DQ, W^UQ, W^QR, W^DKV, W^KR, W^UK, W^UV, W^O``.
    """
    d, H, D = c.d_model, c.n_heads, c.head_dim
    if not c.is_mla:
        return d * H * D + 2 * d * c.n_kv_heads * D + H * D * d  # W_q, W_k, W_v, W_o
    d_q, d_r = c.q_lora_rank or d, c.rope_head_dim
    down_q = d * c.q_lora_rank  # W^DQ (absent when q_lora_rank == 0)
    queries = d_q * H * (D + d_r)  # W^UQ, W^QR
    keys_values = d * (c.kv_lora_rank + d_r) + 2 * c.kv_lora_rank * H * D  # W^DKV,
    return down_q + queries + keys_values + H * D * d  # W^KR, W^UK, W^UV; W^O


def attention_bias_parameters(c: TransformerConfig) -> int:
    """Biases of one layer's attention: ``H d + 2 G d`` (q, k, v), ``+ h`` (o).

    Raises:
        ValueError: the config asks for biases with MLA, which no model has.
    """
    if not (c.bias or c.qkv_bias):
        return 0
    if c.is_mla:
        raise ValueError(
            "config.bias and config.qkv_bias must be False with MLA "
            f"(kv_lora_rank = {c.kv_lora_rank} > 0): biases are not modelled there"
        )
    qkv = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    return qkv + (c.d_model if c.bias else 0)  # W_o has a bias only with c.bias


def mlp_matmul_parameters(c: TransformerConfig) -> int:
    """Weights of one layer's MLP: ``3 h d_ff`` (SwiGLU) or ``2 h d_ff`` (GELU)."""
    n_in = 2 if c.mlp == "swiglu" else 1  # SwiGLU has a gate and an up projection
    return (n_in + 1) * c.d_model * c.d_ff


def mlp_bias_parameters(c: TransformerConfig) -> int:
    """Biases of one layer's MLP: one per output feature of each matrix."""
    if not c.bias:
        return 0
    n_in = 2 if c.mlp == "swiglu" else 1
    return n_in * c.d_ff + c.d_model


def moe_matmul_parameters(c: TransformerConfig, activated: bool = False) -> int:
    """Weights of one MoE layer (all matmul weights; the experts have no biases).

    Args:
        c: the model (``n_experts > 0``).
        activated: count the ``K`` routed experts one token uses, not all ``E``.

    Returns:
        ``E h + (E or K) 3 h d_e + 3 h d_s (+ h)``: router, routed experts, shared
        experts (width ``d_s``) and Qwen-MoE's shared gate.

    Raises:
        ValueError: ``c`` has no experts.
    """
    spec = c.moe_spec()
    if spec is None:
        raise ValueError("config.n_experts must be > 0 for a MoE layer, got 0")
    h = c.d_model
    routed = spec.top_k if activated else spec.n_experts
    return (
        spec.n_experts * h  # router W_r, (E, h)
        + routed * 3 * h * spec.d_expert  # W_1, W_3, W_2 of each expert
        + 3 * h * spec.shared_width  # the shared experts, one SwiGLU
        + (h if spec.shared_gate else 0)  # Qwen-MoE's sigmoid(w^T x)
    )


def routed_expert_parameters(c: TransformerConfig) -> int:
    """Parameters of every routed expert of every MoE layer: ``L_moe E 3 h d_e``.

    What expert parallelism spreads over ranks; 0 for a dense model.
    """
    spec = c.moe_spec()
    if spec is None:
        return 0
    return c.n_moe_layers * spec.n_experts * 3 * c.d_model * spec.d_expert


def norm_parameters(c: TransformerConfig, width: int) -> int:
    """Parameters of one norm over ``width`` features: ``width`` or ``2 width``."""
    return (2 if c.norm == "layernorm" else 1) * width  # LayerNorm adds a bias


def count_parameters(c: TransformerConfig, activated: bool = False) -> ParamCount:
    """Count a model's parameters from its config.

    The first ``L - n_moe`` layers have a dense MLP of width ``d_ff``, the others
    a MoE layer (:func:`moe_matmul_parameters`, counted in ``mlp``).

    Args:
        c: the model.
        activated: count what one token uses: ``K`` of the ``E`` routed experts
            of each MoE layer, and everything else, embedding and head included
            (the convention of the published "activated parameters" of Mixtral,
            Qwen-MoE and DeepSeek). Equal to the total for a dense model.

    Returns:
        The count by part; ``.total`` is ``Psi`` (or the activated ``Psi``).

    Raises:
        ValueError: biases asked for together with MLA.
    """
    d, L, V = c.d_model, c.n_layers, c.vocab_size
    n_moe = c.n_moe_layers
    dense_mlp = (L - n_moe) * (mlp_matmul_parameters(c) + mlp_bias_parameters(c))
    moe = n_moe * moe_matmul_parameters(c, activated) if n_moe else 0
    positions = c.max_seq_len if c.position == "learned" else 0  # GPT-2's wpe
    latent = c.q_lora_rank + c.kv_lora_rank if c.is_mla else 0  # MLA's latent norms
    per_layer_norms = 2 * norm_parameters(c, d) + norm_parameters(c, latent)
    return ParamCount(
        embedding=(V + positions) * d,
        attention=L * (attention_matmul_parameters(c) + attention_bias_parameters(c)),
        mlp=dense_mlp + moe,
        norms=L * per_layer_norms + norm_parameters(c, d),  # + the final norm
        head=0 if c.tie_embeddings else V * d,
    )


def mtp_module_parameters(c: TransformerConfig) -> int:
    """Parameters of one multi-token-prediction module as DeepSeek-V3 ships it.

    DeepSeek-V3 (Sec. 2.2) predicts one more token with a module of its own: a
    projection ``M`` of ``2h x h`` over the normalized hidden state and next-token
    embedding, and one Transformer block like the model's last; the embedding and
    the head are shared with the main model, yet the checkpoint stores a copy of
    both with the module (its ``model.layers.61``). This counts that stored module:
    ``2 V h + 2 h^2 + 3 h`` (two norms on the inputs, one before the head) plus the
    block.

    Args:
        c: the main model.

    Returns:
        The parameters the checkpoint holds for one MTP module.
    """
    d, V = c.d_model, c.vocab_size
    last = c.n_layers - 1
    mlp = moe_matmul_parameters(c) if c.is_moe_layer(last) else mlp_matmul_parameters(c)
    latent = c.q_lora_rank + c.kv_lora_rank if c.is_mla else 0
    attention = attention_matmul_parameters(c) + attention_bias_parameters(c)
    norms = 2 * norm_parameters(c, d) + norm_parameters(c, latent)
    block = attention + mlp + norms  # the block of a MoE layer, norms included
    return 2 * V * d + 2 * d * d + 3 * norm_parameters(c, d) + block
