"""A tiny GPT built to the assumptions of the activation-memory formula.

Korthikanti et al. 2022 (Sec. 4.1) count the activations of a GPT layer as Megatron-LM
runs it: LayerNorm before attention and MLP, one fused QKV projection, explicit
softmax over the s x s scores, dropout after the softmax, after the attention output
projection and after the MLP, and an MLP of width 4h with GELU. This model is that
layer and nothing else, so the bytes autograd saves can be set against the formula
term by term. Two details make it match: dropout goes through
``torch.native_dropout``, which keeps a one-byte boolean mask (``F.dropout`` on a CPU
keeps a full-width noise tensor instead), and the causal mask is added, not
``masked_fill``-ed, so no mask is saved. The shape is a GPT-2-family
:class:`~aiinfra.models.config.TransformerConfig` (h = ``d_model``, a = ``n_heads``,
L = ``n_layers``, s at most ``max_seq_len``); dropout and recomputation are not part
of a model's shape and are arguments of :class:`TinyGPT`. Notation: B = b, T = s,
C = h, nh = a.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from aiinfra.memory.activations import RECOMPUTE
from aiinfra.memory.checkpoint import checkpoint
from aiinfra.models.config import TransformerConfig


def tiny_gpt_config(
    vocab_size: int = 64,
    seq_len: int = 16,
    n_layers: int = 2,
    n_heads: int = 4,
    d_model: int = 32,
) -> TransformerConfig:
    """A small GPT-2-family config; the defaults keep a test under a second.

    The sizes go through :meth:`TransformerConfig.from_hf_config` as a GPT-2
    ``config.json`` would, so the layer choices (LayerNorm, biases, a ``4h`` GELU
    MLP, learned positions, a tied head) are GPT-2's.

    Args:
        vocab_size: V; small, the head is not what we measure.
        seq_len: s, the rows of the position table and the largest causal mask.
        n_layers: L.
        n_heads: a.
        d_model: h.

    Returns:
        The config.

    Raises:
        ValueError: a size is not a positive integer, or ``n_heads`` does not
            divide ``d_model``.
    """
    return TransformerConfig.from_hf_config(
        {
            "model_type": "gpt2",
            "vocab_size": vocab_size,
            "n_positions": seq_len,
            "n_layer": n_layers,
            "n_head": n_heads,
            "n_embd": d_model,
        }
    )


def check_gpt_config(config: TransformerConfig) -> None:
    """Refuse a config that is not the GPT layer of Korthikanti et al.

    Raises:
        ValueError: the config is not of the GPT-2 family (LayerNorm, GELU MLP,
            learned positions, biases) or its heads do not tile ``d_model``.
    """
    family = (config.norm, config.mlp, config.position, config.bias)
    if family != ("layernorm", "gelu", "learned", True) or config.is_mla:
        raise ValueError(
            "config must be of the GPT-2 family (norm='layernorm', mlp='gelu', "
            f"position='learned', bias=True, no MLA), got {family}"
        )
    if config.n_kv_heads != config.n_heads or (
        config.n_heads * config.head_dim != config.d_model
    ):
        raise ValueError(
            "config must have multi-head attention with n_heads * head_dim == "
            f"d_model, got n_heads={config.n_heads}, n_kv_heads="
            f"{config.n_kv_heads}, head_dim={config.head_dim}, d_model="
            f"{config.d_model}"
        )


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout that saves a one-byte mask for backward, on every device."""
    if not training or p == 0.0:
        return x
    return torch.native_dropout(x, p, True)[0]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection (Megatron's)."""

    def __init__(
        self, config: TransformerConfig, dropout: float, recompute: str
    ) -> None:
        super().__init__()
        self.n_heads, self.p, self.recompute = config.n_heads, dropout, recompute
        d, T = config.d_model, config.max_seq_len
        self.c_attn = nn.Linear(d, 3 * d)  # fused Q, K, V
        self.c_proj = nn.Linear(d, d)
        causal = torch.full((T, T), float("-inf")).triu(1)
        self.register_buffer("causal", causal, persistent=False)  # (T, T)

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(QK^T / sqrt(d) + mask), dropout, times V: the part of size as^2b."""
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = F.softmax(att + self.causal[:T, :T], dim=-1)
        att = dropout(att, self.p, self.training)
        return att @ v  # (B, nh, T, hs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention of ``x``, shape (B, T, C) in and out."""
        B, T, C = x.shape
        nh = self.n_heads
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        if self.recompute == "selective" and self.training:
            y = checkpoint(self.core, q, k, v)
        else:
            y = self.core(q, k, v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return dropout(self.c_proj(y), self.p, self.training)


class MLP(nn.Module):
    """h -> d_ff (4h in GPT) -> h with GELU, then dropout."""

    def __init__(self, config: TransformerConfig, dropout: float) -> None:
        super().__init__()
        self.p = dropout
        self.c_fc = nn.Linear(config.d_model, config.d_ff)
        self.c_proj = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The MLP of ``x``, shape (B, T, C) in and out."""
        x = F.gelu(self.c_fc(x))  # (B, T, 4C)
        return dropout(self.c_proj(x), self.p, self.training)


class Block(nn.Module):
    """Pre-LayerNorm transformer layer; with ``recompute="full"``, checkpointed."""

    def __init__(
        self, config: TransformerConfig, dropout: float, recompute: str
    ) -> None:
        super().__init__()
        self.recompute = recompute
        self.ln_1 = nn.LayerNorm(config.d_model, eps=config.norm_eps)
        self.attn = CausalSelfAttention(config, dropout, recompute)
        self.ln_2 = nn.LayerNorm(config.d_model, eps=config.norm_eps)
        self.mlp = MLP(config, dropout)

    def layer(self, x: torch.Tensor) -> torch.Tensor:
        """The layer without checkpointing: two residual branches."""
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layer, shape (B, T, C) in and out, checkpointed if asked."""
        if self.recompute == "full" and self.training:
            return checkpoint(self.layer, x)  # keep only the layer input: 2sbh
        return self.layer(x)


class TinyGPT(nn.Module):
    """GPT-2 layout: token + position embedding, L blocks, final LayerNorm, head.

    Args:
        config: a GPT-2-family config (:func:`tiny_gpt_config`); the head is tied
            to the token embedding when ``config.tie_embeddings``, as in GPT-2/3.
        dropout: the probability of every dropout (GPT-3 / Megatron place one after
            the embedding, the softmax, the attention output and the MLP), so that
            their masks are saved as in the paper.
        recompute: ``"none"``, ``"selective"`` (the attention core) or ``"full"``
            (each layer).

    Raises:
        ValueError: ``config`` is not of the GPT-2 family (see
            :func:`check_gpt_config`), ``dropout`` is not in [0, 1), or
            ``recompute`` is unknown.
    """

    def __init__(
        self, config: TransformerConfig, dropout: float = 0.1, recompute: str = "none"
    ) -> None:
        super().__init__()
        check_gpt_config(config)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
        self.config, self.p = config, dropout
        self.wte = nn.Embedding(config.vocab_size, config.d_model)
        self.wpe = nn.Embedding(config.max_seq_len, config.d_model)
        self.blocks = nn.ModuleList(
            Block(config, dropout, recompute) for _ in range(config.n_layers)
        )
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.wte.weight  # tied, as in GPT-2 and GPT-3

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of the next token.

        Args:
            idx: token ids, shape (B, T), T <= ``config.max_seq_len``.

        Returns:
            Logits, shape (B, T, V).

        Raises:
            ValueError: the sequence is longer than ``config.max_seq_len``.
        """
        T = idx.size(1)
        if T > self.config.max_seq_len:
            raise ValueError(
                f"sequence length {T} exceeds max_seq_len={self.config.max_seq_len}"
            )
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        x = dropout(x, self.p, self.training)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))  # (B, T, V)
