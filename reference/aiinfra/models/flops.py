"""Parameters and training FLOPs of a Transformer, by formula and by counting.

Training costs about ``6 Psi`` FLOPs per token (Kaplan et al. 2020, Sec. 2.1): a matmul
with ``N`` weights does ``2N`` FLOPs per token forward and ``4N`` backward (one
product for the input gradient, one for the weight gradient). Attention adds
``12 L H d T`` (PaLM, Chowdhery et al. 2022, App. B): per layer and token, the scores
``q k^T`` and the weighted sum ``p v`` each take ``2 H Q T`` FLOPs forward, times 3
for training. Here ``N`` counts the weights that enter a matrix multiplication:
every parameter except the input embedding and learned positions (table look-ups),
the norm parameters and the biases (elementwise); :mod:`aiinfra.models.params`
counts them by part. The formula leaves out every non-matmul operation: the
embedding gather, the norms, RoPE, the softmax and its mask, the activation (SiLU
and the gate product, or GELU), the bias and residual adds and the loss.
``torch.utils.flop_counter.FlopCounterMode`` counts matmuls only too, so the two
agree exactly; the omitted terms are ``O(d)`` or ``O(T)`` per token and layer
against the ``O(d^2)`` of the matmuls. For MLA the score width ``d_h + d_h^R`` and
the value width ``d_h`` differ, and the attention term reads
``6 L H T (d_qk + d_v)``, which is ``12 L H d T`` when both equal ``Q``. In a
mixture-of-experts model a token multiplies only the ``K`` experts it is routed to,
the shared experts and the router: ``Psi`` is then the *activated* matmul weights
(Mixtral 8x7B stores eight experts per layer and runs each token through two).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import (
    attention_matmul_parameters,
    count_parameters,
    mlp_matmul_parameters,
    moe_matmul_parameters,
)
from aiinfra.models.presets import preset
from aiinfra.report import Table

if TYPE_CHECKING:  # the formulas need no torch; counting and measuring do
    from aiinfra.models.transformer import Transformer


def matmul_parameters(c: TransformerConfig) -> int:
    """``Psi`` of the ``6 Psi`` rule: every weight a token's activations multiply.

    The output head counts even when tied: it is a matmul either way. Biases,
    norms and the embedding tables do not. A MoE layer counts its router, its
    shared experts and ``K`` of its ``E`` routed experts: the weights one token
    meets, whichever ``K`` they are.

    Args:
        c: the model (either family, MLA and MoE included).

    Returns:
        ``L attention + (L - L_moe) MLP + L_moe MoE_K + V d`` weights.
    """
    n_moe = c.n_moe_layers
    dense = (c.n_layers - n_moe) * mlp_matmul_parameters(c)
    moe = n_moe * moe_matmul_parameters(c, activated=True) if n_moe else 0
    attention = c.n_layers * attention_matmul_parameters(c)
    return attention + dense + moe + c.vocab_size * c.d_model


def attention_flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """The attention term ``6 L H T (d_qk + d_v)``; ``12 L H d T`` for GQA/MHA."""
    d_qk = c.head_dim + (c.rope_head_dim if c.is_mla else 0)
    return 6 * c.n_layers * c.n_heads * seq_len * (d_qk + c.head_dim)


def training_flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """Matmul FLOPs of one training step per token: ``6 Psi + 12 L H d T``.

    The attention term counts the full ``T x T`` score matrix, as PaLM does; a
    causal kernel that skips the masked half would do less.
    """
    return 6 * matmul_parameters(c) + attention_flops_per_token(c, seq_len)


def measured_training_flops_per_token(
    model: Transformer, batch_size: int = 1, seq_len: int = 16
) -> float:
    """FLOPs of one forward and backward pass counted by ``FlopCounterMode``.

    Args:
        model: the model to run (random tokens, cross-entropy loss).
        batch_size: ``B``.
        seq_len: ``T``.

    Returns:
        Counted FLOPs divided by ``B T``.
    """
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    V = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(V, (batch_size, seq_len), generator=generator)  # (B, T)
    with FlopCounterMode(display=False) as counter:
        logits = model(tokens)  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops() / (batch_size * seq_len)


def flops_check_table(
    config: TransformerConfig | None = None, seq_len: int = 32
) -> Table:
    """Formula against counting for a small model: parameters and training FLOPs."""
    from aiinfra.models.transformer import Transformer

    config = config or TransformerConfig()
    model = Transformer(config)
    counted = sum(p.numel() for p in model.parameters())
    measured = measured_training_flops_per_token(model, 1, seq_len)
    N = matmul_parameters(config)
    rows = [
        ["parameters", count_parameters(config).total, counted],
        ["6 Psi (Psi = matmul weights)", 6 * N, ""],
        ["12 L H d T (attention)", attention_flops_per_token(config, seq_len), ""],
        [
            "training FLOPs per token",
            training_flops_per_token(config, seq_len),
            int(measured),
        ],
    ]
    note = "Counted: Module.parameters() and FlopCounterMode over forward + backward."
    stamp = (
        f"h = {config.d_model}, L = {config.n_layers}, H = {config.n_heads}, "
        f"G = {config.n_kv_heads}, V = {config.vocab_size}, T = {seq_len}"
    )
    return Table(["quantity", "formula", "counted"], rows, note, stamp)


def counted_parameters(c: TransformerConfig) -> int:
    """Parameters of :class:`Transformer` built on the meta device (no memory used)."""
    import torch

    from aiinfra.models.transformer import Transformer

    with torch.device("meta"):
        model = Transformer(c)
    return sum(p.numel() for p in model.parameters())


DENSE_MODELS = ("llama-3-8b", "llama-3-70b", "mistral-7b", "qwen2.5-72b")


def flops_breakdown_table(
    seq_len: int = 8192, names: tuple[str, ...] = DENSE_MODELS
) -> Table:
    """Parameters, ``6 Psi`` and the attention term of dense models at length ``T``.

    Args:
        seq_len: ``T``.
        names: keys of :data:`~aiinfra.models.presets.PRESETS`.

    Returns:
        One row per model: parameters by formula (:func:`count_parameters`) and
        counted on this package's :class:`Transformer` built on the meta device,
        then GFLOP per token of ``6 Psi``, of ``12 L H d T`` and the attention share.
    """
    rows = []
    for name in names:
        c = preset(name)
        six_n, attn = 6 * matmul_parameters(c), attention_flops_per_token(c, seq_len)
        rows.append(
            [
                name,
                count_parameters(c).total,
                counted_parameters(c),
                round(six_n / 1e9, 1),
                round(attn / 1e9, 1),
                f"{attn / (six_n + attn):.1%}",
            ]
        )
    note = (
        "GFLOP = 1e9 FLOPs per token of one training step. Formula: "
        "count_parameters (Qwen2.5's query, key and value biases included); "
        "module: this package's Transformer built from the same config on the "
        "meta device."
    )
    stamp = f"T = {seq_len}"
    return Table(
        [
            "model",
            "params (formula)",
            "params (module)",
            "6 Psi (GFLOP)",
            "12LHQT (GFLOP)",
            "attention share",
        ],
        rows,
        note,
        stamp,
    )
