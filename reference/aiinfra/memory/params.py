"""Counting parameters from a model's shape.

A decoder-only transformer has a token embedding (V h), L identical layers and an
output head that either reuses the embedding (tied) or is its own V h matrix. Each
layer holds the attention projections (a d_h query columns, and 2 n_kv d_h key and
value columns with grouped-query attention) and the output projection, an MLP
(two h x f matrices, or three for SwiGLU), and two norms (h weights each for RMSNorm,
2h for LayerNorm). The count is the Psi of every memory formula in this chapter; it
is tested against the published totals of real models and against ``numel()`` of
small ``torch.nn`` models built from the same config.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiinfra.memory.config import ModelConfig


@dataclass(frozen=True)
class ParamCount:
    """Parameters of a model, by part (counts, not bytes).

    Attributes:
        embedding: token embedding plus learned position embedding.
        attention: query, key, value and output projections of all layers.
        mlp: MLP matrices of all layers.
        norms: the two norms of every layer and the final norm.
        head: the output projection, 0 when tied to the embedding.
    """

    embedding: int
    attention: int
    mlp: int
    norms: int
    head: int

    @property
    def total(self) -> int:
        """Psi, the number the memory formulas multiply."""
        return self.embedding + self.attention + self.mlp + self.norms + self.head


def attention_parameters(cfg: ModelConfig) -> int:
    """Parameters of one layer's attention: W_q, W_k, W_v, W_o (and biases).

    Args:
        cfg: the model's shape.

    Returns:
        h (a + 2 n_kv) d_h + a d_h h, plus (a + 2 n_kv) d_h + h biases if present.
    """
    h, d = cfg.hidden_size, cfg.head_dim
    qkv_out = (cfg.num_heads + 2 * cfg.num_kv_heads) * d  # GQA shrinks K and V
    o_in = cfg.num_heads * d
    weights = h * qkv_out + o_in * h
    biases = qkv_out + h if cfg.bias else 0
    return weights + biases


def mlp_parameters(cfg: ModelConfig) -> int:
    """Parameters of one layer's MLP: 2 h f (GELU) or 3 h f (SwiGLU), plus biases.

    Args:
        cfg: the model's shape.

    Returns:
        The MLP parameter count of one layer.
    """
    h, f = cfg.hidden_size, cfg.intermediate_size
    n_in = 2 if cfg.gated_mlp else 1  # SwiGLU has a gate and an up projection
    weights = n_in * h * f + f * h
    biases = n_in * f + h if cfg.bias else 0
    return weights + biases


def norm_parameters(cfg: ModelConfig) -> int:
    """Parameters of one norm: h (RMSNorm weight) or 2h (LayerNorm weight and bias)."""
    return (2 if cfg.layer_norm else 1) * cfg.hidden_size


def count_parameters(cfg: ModelConfig) -> ParamCount:
    """Count a model's parameters from its shape.

    Args:
        cfg: the model's shape (see :func:`aiinfra.memory.config.load_config`).

    Returns:
        The count by part; ``.total`` is Psi.
    """
    h, n_layers = cfg.hidden_size, cfg.num_layers
    embedding = (cfg.vocab_size + cfg.learned_positions) * h
    return ParamCount(
        embedding=embedding,
        attention=n_layers * attention_parameters(cfg),
        mlp=n_layers * mlp_parameters(cfg),
        norms=(2 * n_layers + 1) * norm_parameters(cfg),  # two per layer + final
        head=0 if cfg.tie_embeddings else cfg.vocab_size * h,
    )
