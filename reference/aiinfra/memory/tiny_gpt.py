"""A tiny GPT built to the assumptions of the activation-memory formula.

Korthikanti et al. 2022 (Sec. 4.1) count the activations of a GPT layer as Megatron-LM
runs it: LayerNorm before attention and MLP, one fused QKV projection, explicit
softmax over the s x s scores, dropout after the softmax, after the attention output
projection and after the MLP, and an MLP of width 4h with GELU. This model is that
layer and nothing else, so the bytes autograd saves can be set against the formula
term by term. Two details make it match: dropout goes through
``torch.native_dropout``, which keeps a one-byte boolean mask (``F.dropout`` on a CPU
keeps a full-width noise tensor instead), and the causal mask is added, not
``masked_fill``-ed, so no mask is saved. Notation: B = b, T = s, C = h, nh = a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aiinfra.memory.activations import RECOMPUTE
from aiinfra.memory.checkpoint import checkpoint


@dataclass
class TinyGPTConfig:
    """Shape of a :class:`TinyGPT`; the defaults keep a test under a second."""

    vocab_size: int = 64  # V: small, the head is not what we measure
    seq_len: int = 16  # s, also the largest causal mask
    n_layer: int = 2  # L
    n_head: int = 4  # a
    n_embd: int = 32  # h
    dropout: float = 0.1  # every dropout of GPT-3 / Megatron, so masks are saved
    recompute: str = "none"  # "none", "selective" (attention core) or "full" (layer)

    def __post_init__(self) -> None:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_head = {self.n_head} must divide n_embd")
        if self.recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {RECOMPUTE}")

    def to_hf_config(self) -> dict[str, Any]:
        """The same shape as a GPT-2-style ``config.json`` dictionary."""
        return {
            "model_type": "gpt2",
            "n_embd": self.n_embd,
            "n_head": self.n_head,
            "n_layer": self.n_layer,
            "n_positions": self.seq_len,
            "vocab_size": self.vocab_size,
        }


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Dropout that saves a one-byte mask for backward, on every device."""
    if not training or p == 0.0:
        return x
    return torch.native_dropout(x, p, True)[0]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection (Megatron's)."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)  # fused Q, K, V
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        causal = torch.full((cfg.seq_len, cfg.seq_len), float("-inf")).triu(1)
        self.register_buffer("causal", causal, persistent=False)  # (T, T)

    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(QK^T / sqrt(d) + mask), dropout, times V: the part of size as^2b."""
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        att = F.softmax(att + self.causal[:T, :T], dim=-1)
        att = dropout(att, self.cfg.dropout, self.training)
        return att @ v  # (B, nh, T, hs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        nh = self.cfg.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)  # (B, nh, T, hs)
        if self.cfg.recompute == "selective" and self.training:
            y = checkpoint(self.core, q, k, v)
        else:
            y = self.core(q, k, v)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        return dropout(self.c_proj(y), self.cfg.dropout, self.training)


class MLP(nn.Module):
    """h -> 4h -> h with GELU, then dropout."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.c_fc(x))  # (B, T, 4C)
        return dropout(self.c_proj(x), self.cfg.dropout, self.training)


class Block(nn.Module):
    """Pre-LayerNorm transformer layer; with ``recompute="full"``, checkpointed."""

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def layer(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.cfg.recompute == "full" and self.training:
            return checkpoint(self.layer, x)  # keep only the layer input: 2sbh
        return self.layer(x)


class TinyGPT(nn.Module):
    """GPT-2 layout: token + position embedding, L blocks, final LayerNorm, tied head.

    Args:
        cfg: the model's shape and recomputation mode.
    """

    def __init__(self, cfg: TinyGPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2 and GPT-3

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits of the next token.

        Args:
            idx: token ids, shape (B, T), T <= ``seq_len``.

        Returns:
            Logits, shape (B, T, V).

        Raises:
            ValueError: the sequence is longer than ``seq_len``.
        """
        T = idx.size(1)
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence length {T} exceeds seq_len={self.cfg.seq_len}")
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)  # (B, T, C)
        x = dropout(x, self.cfg.dropout, self.training)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))  # (B, T, V)
