"""Parameters and training FLOPs of a Transformer, by formula and by counting.

Training costs about ``6N`` FLOPs per token (Kaplan et al. 2020, Sec. 2.1): a matmul
with ``N`` weights does ``2N`` FLOPs per token forward and ``4N`` backward (one
product for the input gradient, one for the weight gradient). Attention adds
``12 L H Q T`` (PaLM, Chowdhery et al. 2022, App. B): per layer and token, the scores
``q k^T`` and the weighted sum ``p v`` each take ``2 H Q T`` FLOPs forward, times 3
for training. Here ``N`` counts the parameters that enter a matrix multiplication:
all of them except the input embedding (a table look-up) and the norm gains
(elementwise). The formula leaves out every non-matmul operation: the embedding
gather, RMSNorm, RoPE, the softmax and its mask, SiLU and the gate product, the
residual adds and the loss. ``torch.utils.flop_counter.FlopCounterMode`` counts
matmuls only too, so the two agree exactly; the omitted terms are ``O(d)`` or
``O(T)`` per token and layer against the ``O(d^2)`` of the matmuls. For MLA the
score width ``d_h + d_h^R`` and the value width ``d_h`` differ, and the attention
term reads ``6 L H T (d_qk + d_v)``, which is ``12 L H Q T`` when both equal ``Q``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from aiinfra.models.config import TransformerConfig, published_config
from aiinfra.models.transformer import Transformer
from aiinfra.report import Table


def attention_matmul_parameters(c: TransformerConfig) -> int:
    """Weights of one attention layer's projections (no norm gains)."""
    d, H, D = c.d_model, c.n_heads, c.head_dim
    if not c.is_mla:
        return d * H * D + 2 * d * c.n_kv_heads * D + H * D * d  # W_q, W_k, W_v, W_o
    d_q, d_r = c.q_lora_rank or d, c.rope_head_dim
    down_q = d * c.q_lora_rank  # W^DQ (absent when q_lora_rank == 0)
    queries = d_q * H * (D + d_r)  # W^UQ, W^QR
    keys_values = d * (c.kv_lora_rank + d_r) + 2 * c.kv_lora_rank * H * D  # W^DKV,
    return down_q + queries + keys_values + H * D * d  # W^KR, W^UK, W^UV; W^O


def parameter_count(c: TransformerConfig) -> int:
    """All parameters of :class:`Transformer` (a tied head counted once)."""
    d = c.d_model
    norms = 2 * d + (c.q_lora_rank + c.kv_lora_rank if c.is_mla else 0)
    per_layer = attention_matmul_parameters(c) + 3 * d * c.d_ff + norms
    embeddings = c.vocab_size * d * (1 if c.tie_embeddings else 2)
    return embeddings + c.n_layers * per_layer + d  # + the final norm


def matmul_parameters(c: TransformerConfig) -> int:
    """``N`` of the ``6N`` rule: every weight that multiplies an activation.

    The output head counts even when tied: it is a matmul either way.
    """
    per_layer = attention_matmul_parameters(c) + 3 * c.d_model * c.d_ff
    return c.n_layers * per_layer + c.vocab_size * c.d_model


def attention_flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """The attention term ``6 L H T (d_qk + d_v)``; ``12 L H Q T`` for GQA/MHA."""
    d_qk = c.head_dim + (c.rope_head_dim if c.is_mla else 0)
    return 6 * c.n_layers * c.n_heads * seq_len * (d_qk + c.head_dim)


def training_flops_per_token(c: TransformerConfig, seq_len: int) -> int:
    """Matmul FLOPs of one training step per token: ``6N + 12 L H Q T``.

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
    config = config or TransformerConfig()
    model = Transformer(config)
    counted = sum(p.numel() for p in model.parameters())
    measured = measured_training_flops_per_token(model, 1, seq_len)
    N = matmul_parameters(config)
    rows = [
        ["parameters", parameter_count(config), counted],
        ["6N (N = matmul weights)", 6 * N, ""],
        ["12 L H Q T (attention)", attention_flops_per_token(config, seq_len), ""],
        [
            "training FLOPs per token",
            training_flops_per_token(config, seq_len),
            int(measured),
        ],
    ]
    note = (
        f"Model: d={config.d_model}, L={config.n_layers}, H={config.n_heads}, "
        f"G={config.n_kv_heads}, V={config.vocab_size}, T={seq_len}. Counted: "
        "Module.parameters() and FlopCounterMode over forward + backward."
    )
    return Table(["quantity", "formula", "counted"], rows, note)


def counted_parameters(c: TransformerConfig) -> int:
    """Parameters of :class:`Transformer` built on the meta device (no memory used)."""
    with torch.device("meta"):
        model = Transformer(c)
    return sum(p.numel() for p in model.parameters())


DENSE_MODELS = ("Llama-3-8B", "Llama-3-70B", "Mistral-7B", "Qwen2.5-72B")


def flops_breakdown_table(
    seq_len: int = 8192, names: tuple[str, ...] = DENSE_MODELS
) -> Table:
    """Parameters, ``6N`` and the attention term of real dense models at length ``T``.

    Args:
        seq_len: ``T``.
        names: keys of :data:`~aiinfra.models.config.PUBLISHED_CONFIGS`.

    Returns:
        One row per model: parameters by formula and counted on the meta device,
        then GFLOP per token of ``6N``, of ``12 L H Q T`` and the attention share.
    """
    rows = []
    for name in names:
        c = published_config(name)
        six_n, attn = 6 * matmul_parameters(c), attention_flops_per_token(c, seq_len)
        rows.append(
            [
                name,
                parameter_count(c),
                counted_parameters(c),
                round(six_n / 1e9, 1),
                round(attn / 1e9, 1),
                f"{attn / (six_n + attn):.1%}",
            ]
        )
    note = (
        f"T = {seq_len}; GFLOP = 1e9 FLOPs per token of one training step. Layout "
        "of this package's Transformer, which has no biases: Qwen2.5's published "
        "total also counts its query, key and value biases."
    )
    return Table(
        [
            "model",
            "params (formula)",
            "params (module)",
            "6N (GFLOP)",
            "12LHQT (GFLOP)",
            "attention share",
        ],
        rows,
        note,
    )
