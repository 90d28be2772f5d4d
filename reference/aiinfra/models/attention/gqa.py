"""Multi-head, multi-query and grouped-query attention as one module, with a KV cache.

Multi-head attention (Vaswani et al. 2017) gives each of the ``H`` query heads its own
key and value head. Multi-query attention (Shazeer 2019) shares one key/value head
among all of them; grouped-query attention (Ainslie et al. 2023) sits in between:
``G`` key/value heads, each shared by a group of ``H / G`` query heads. One
parameter, ``n_kv_heads = G``, selects the variant: ``G = H`` is MHA, ``G = 1`` is
MQA; Mistral adds a sliding window (Jiang et al. 2023): a query sees only the
``W`` latest keys. During decoding the keys and values of past tokens are kept in a
:class:`KVCache` so that each new token costs one row of attention, not a whole
forward pass; the cache holds ``2 G d`` numbers per token and layer (DeepSeek-V2,
Table 1). Notation (the book's): ``B`` batch, ``T`` new positions, ``T_kv`` cached
positions (the local ``S``), ``d`` head dimension (the local ``D``), ``h`` model width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiinfra.models.config import TransformerConfig
from aiinfra.models.layers import RotaryEmbedding


class KVCache:
    """Preallocated keys and values of one layer, filled left to right.

    Args:
        batch_size: ``B``.
        max_seq_len: capacity in positions.
        n_kv_heads: ``G``.
        k_dim: width of a cached key head.
        v_dim: width of a cached value head (default ``k_dim``).
        dtype: element type of the buffers.
        device: where the buffers live.
    """

    def __init__(
        self,
        batch_size: int,
        max_seq_len: int,
        n_kv_heads: int,
        k_dim: int,
        v_dim: int | None = None,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        v_dim = k_dim if v_dim is None else v_dim
        self.k = torch.zeros(
            batch_size, n_kv_heads, max_seq_len, k_dim, dtype=dtype, device=device
        )  # (B, G, T_max, d)
        self.v = torch.zeros(
            batch_size, n_kv_heads, max_seq_len, v_dim, dtype=dtype, device=device
        )  # (B, G, T_max, d_v)
        self.max_seq_len = max_seq_len
        self.length = 0

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``T`` new positions and return everything cached so far.

        Args:
            k: new keys, shape ``(B, G, T, d)``.
            v: new values, shape ``(B, G, T, d_v)``.

        Returns:
            ``(k, v)`` of all ``T_kv = length`` positions: ``(B, G, T_kv, d)``,
            ``(B, G, T_kv, d_v)``.

        Raises:
            ValueError: the shapes do not match the cache, or the cache would
                overflow ``max_seq_len``.
        """
        for name, new, buf in (("k", k, self.k), ("v", v, self.v)):
            fixed = (buf.shape[0], buf.shape[1], buf.shape[3])  # all but T
            if new.dim() != 4 or (new.shape[0], new.shape[1], new.shape[3]) != fixed:
                raise ValueError(
                    f"{name} has shape {tuple(new.shape)}, the cache holds "
                    f"(B, G, T, D) = ({fixed[0]}, {fixed[1]}, T, {fixed[2]})"
                )
        T = k.shape[2]
        if self.length + T > self.max_seq_len:
            raise ValueError(
                f"KV cache overflow: {self.length} cached + {T} new positions > "
                f"max_seq_len={self.max_seq_len}"
            )
        self.k[:, :, self.length : self.length + T] = k
        self.v[:, :, self.length : self.length + T] = v
        self.length += T
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def numel_per_token(self) -> int:
        """Elements held per cached position (summed over batch rows)."""
        return (self.k.numel() + self.v.numel()) // self.max_seq_len


def grouped_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    start_pos: int = 0,
    scale: float | None = None,
    window: int = 0,
) -> Tensor:
    """Causal softmax attention in which ``H / G`` query heads share a KV head.

    Query row ``t`` sits at position ``p = start_pos + t`` and sees keys ``0 .. p``,
    or with a sliding window (Mistral) only the ``window`` latest,
    ``p - window + 1 .. p``. Query head ``i`` uses key/value head ``i // (H / G)``, the
    same convention as ``repeat_interleave`` (and SDPA's ``enable_gqa``).

    Args:
        q: queries, shape ``(B, H, T, d)``.
        k: keys, shape ``(B, G, T_kv, d)``.
        v: values, shape ``(B, G, T_kv, d_v)``.
        start_pos: position of the first query (``T_kv - T`` when decoding).
        scale: score scale; default ``1 / sqrt(d)``.
        window: keys a query sees, itself included; 0 for all earlier keys.

    Returns:
        The attention output, shape ``(B, H, T, d_v)``.
    """
    # region grouped-attention
    B, H, T, D = q.shape
    G, S = k.shape[1], k.shape[2]
    scale = 1 / math.sqrt(D) if scale is None else scale
    q = q.view(B, G, H // G, T, D)  # (B, G, H/G, T, d)
    scores = torch.einsum("bgrtd,bgsd->bgrts", q, k) * scale  # (B, G, H/G, T, T_kv)
    pos_q = start_pos + torch.arange(T, device=q.device)[:, None]  # (T, 1)
    pos_k = torch.arange(S, device=q.device)  # (T_kv,)
    visible = pos_k <= pos_q  # (T, T_kv)
    if window:
        visible &= pos_k > pos_q - window  # (T, T_kv)
    scores = scores.masked_fill(~visible, float("-inf"))
    p = torch.softmax(scores.float(), dim=-1).type_as(v)  # (B, G, H/G, T, T_kv)
    o = torch.einsum("bgrts,bgse->bgrte", p, v)  # (B, G, H/G, T, d_v)
    return o.reshape(B, H, T, v.shape[-1])  # (B, H, T, d_v)


class GroupedQueryAttention(nn.Module):
    """Attention with ``n_heads`` query heads and ``n_kv_heads`` key/value heads.

    The config gives the sizes ``h``, ``H``, ``G``, ``d`` (which need not equal
    ``h / H``), the RoPE table (``max_seq_len``, ``rope_theta``; no rotation when
    ``position`` is ``"learned"``), the biases (on ``W_q, W_k, W_v`` when
    ``qkv_bias`` or ``bias``, on ``W_o`` when ``bias``) and the sliding window.

    Args:
        config: the model shape.

    Raises:
        TypeError: ``config`` is not a :class:`TransformerConfig`.
        ValueError: the config selects multi-head latent attention.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {config!r}")
        if config.is_mla:
            raise ValueError(
                "config has kv_lora_rank > 0 (MLA); build MultiHeadLatentAttention"
            )
        d, H, G, D = config.d_model, config.n_heads, config.n_kv_heads, config.head_dim
        self.d_model, self.n_heads, self.n_kv_heads, self.head_dim = d, H, G, D
        self.max_seq_len, self.window = config.max_seq_len, config.sliding_window
        qkv_bias = config.qkv_bias or config.bias
        self.wq = nn.Linear(d, H * D, bias=qkv_bias)
        self.wk = nn.Linear(d, G * D, bias=qkv_bias)
        self.wv = nn.Linear(d, G * D, bias=qkv_bias)
        self.wo = nn.Linear(H * D, d, bias=config.bias)
        self.rope = (
            RotaryEmbedding(D, config.max_seq_len, config.rope_theta)
            if config.position == "rope"
            else None  # GPT-2/3: positions were added to the embeddings
        )

    def new_cache(
        self,
        batch_size: int,
        max_seq_len: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> KVCache:
        """An empty cache shaped for this layer (``G`` heads of width ``d``)."""
        return KVCache(
            batch_size,
            max_seq_len or self.max_seq_len,
            self.n_kv_heads,
            self.head_dim,
            dtype=dtype or self.wq.weight.dtype,
            device=self.wq.weight.device,
        )

    def forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """Attend causally over ``x`` (and, with a cache, over all earlier tokens).

        Args:
            x: hidden states of ``T`` new tokens, shape ``(B, T, h)``.
            cache: this layer's cache; the new keys and values are appended to it.

        Returns:
            Shape ``(B, T, h)``.

        Raises:
            ValueError: ``x`` is not ``(B, T, h)``, the cache does not fit this
                layer or would overflow, or positions run past the RoPE table.
        """
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, {self.d_model}), got {tuple(x.shape)}")
        # region cached-forward (the input is checked above)
        B, T, _ = x.shape
        H, G, D = self.n_heads, self.n_kv_heads, self.head_dim
        start = 0 if cache is None else cache.length
        q = self.wq(x).view(B, T, H, D).transpose(1, 2)  # (B, H, T, d)
        k = self.wk(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, d)
        v = self.wv(x).view(B, T, G, D).transpose(1, 2)  # (B, G, T, d)
        if self.rope is not None:
            q, k = self.rope(q, start), self.rope(k, start)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, G, T_kv, d) with T_kv = start + T
        o = grouped_attention(q, k, v, start, window=self.window)  # (B, H, T, d)
        return self.wo(o.transpose(1, 2).reshape(B, T, H * D))  # (B, T, h)
