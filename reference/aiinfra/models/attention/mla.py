"""Multi-head latent attention (MLA) of DeepSeek-V2/V3, and its absorbed decode path.

MLA (DeepSeek-AI 2024, "DeepSeek-V2", Sec. 2.1, Eqs. 9-19) compresses the keys and
values of a token jointly into one latent ``c^KV = W^DKV x`` of width ``d_c`` and
caches that latent instead of ``H`` keys and values; each head recovers its key
``W^UK c^KV`` and value ``W^UV c^KV``. Queries are compressed the same way
(``c^Q = W^DQ x``, ``q^C = W^UQ c^Q``) to save activation memory in training. RoPE
does not commute with the up-projections, so position enters through a decoupled
key ``k^R = RoPE(W^KR x)`` of width ``d^R``, shared by all heads and cached next to
the latent, and a per-head query ``q^R = RoPE(W^QR c^Q)``: ``(d_c + d^R)`` numbers
per token and layer. When decoding, ``W^UK`` can be absorbed into the query and
``W^UV`` into the output projection (Sec. 2.1.2), so attention runs over the cached
latents directly, as multi-query attention with one head of width ``d_c + d^R``.
Notation (the book's; DeepSeek-V2 writes ``n_h``, ``d_h``, ``d_h^R``): ``H`` heads of
width ``d`` (the local ``d_h``), ``x`` a token's hidden state, ``d^R`` the RoPE width;
``B, T, T_kv`` as in ``attention``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from aiinfra.models.attention.gqa import KVCache, grouped_attention
from aiinfra.models.config import TransformerConfig
from aiinfra.models.layers import RMSNorm, RotaryEmbedding

LATENT_NORM_EPS = 1e-6  # DeepSeek's code: RMSNorm(q_lora_rank), RMSNorm(kv_lora_rank)


class LatentKVCache(KVCache):
    """MLA's cache: the latent ``c^KV`` (in ``k``) and the RoPE key (in ``v``).

    Both are stored as a single shared "head", shapes ``(B, 1, T_max, d_c)`` and
    ``(B, 1, T_max, d^R)``; ``update(c_kv, k_rope)`` appends to them.
    """

    def __init__(
        self,
        batch_size: int,
        max_seq_len: int,
        kv_lora_rank: int,
        rope_head_dim: int,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(
            batch_size,
            max_seq_len,
            1,
            kv_lora_rank,
            rope_head_dim,
            dtype=dtype,
            device=device,
        )


class MultiHeadLatentAttention(nn.Module):
    """MLA with a naive path (:meth:`forward`) and an absorbed one for decoding.

    The config gives ``h``, ``H``, ``d`` (``head_dim``, the width of a head's
    content query, key and value), ``d_c`` (``kv_lora_rank``), ``d_c'``
    (``q_lora_rank``; 0 for full-rank queries), ``d^R`` (``rope_head_dim``), the
    RoPE table and the sliding window. The RMSNorms on the latents use
    :data:`LATENT_NORM_EPS`, as in DeepSeek's code, whatever ``norm_eps`` says.

    Args:
        config: the model shape.

    Raises:
        TypeError: ``config`` is not a :class:`TransformerConfig`.
        ValueError: the config does not select MLA (``kv_lora_rank`` is 0), or asks
            for biases, which MLA does not have here.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {config!r}")
        if not config.is_mla:
            raise ValueError("MLA needs kv_lora_rank > 0, got 0")
        if config.bias or config.qkv_bias:
            raise ValueError("MLA with biases (bias or qkv_bias) is not modelled")
        d_model, H, d_h = config.d_model, config.n_heads, config.head_dim
        d_c, d_cq, d_r = config.kv_lora_rank, config.q_lora_rank, config.rope_head_dim
        self.d_model, self.n_heads, self.head_dim = d_model, H, d_h
        self.kv_lora_rank, self.rope_head_dim = d_c, d_r
        self.max_seq_len, self.window = config.max_seq_len, config.sliding_window
        d_q = d_cq or d_model  # uncompressed queries read h directly
        self.w_dq = nn.Linear(d_model, d_q, bias=False) if d_cq else nn.Identity()
        self.q_norm = RMSNorm(d_q, LATENT_NORM_EPS) if d_cq else nn.Identity()
        self.w_uq = nn.Linear(d_q, H * d_h, bias=False)  # W^UQ
        self.w_qr = nn.Linear(d_q, H * d_r, bias=False)  # W^QR
        self.w_dkv = nn.Linear(d_model, d_c, bias=False)  # W^DKV
        self.kv_norm = RMSNorm(d_c, LATENT_NORM_EPS)
        self.w_kr = nn.Linear(d_model, d_r, bias=False)  # W^KR
        self.w_uk = nn.Linear(d_c, H * d_h, bias=False)  # W^UK
        self.w_uv = nn.Linear(d_c, H * d_h, bias=False)  # W^UV
        self.w_o = nn.Linear(H * d_h, d_model, bias=False)  # W^O
        self.rope = RotaryEmbedding(d_r, config.max_seq_len, config.rope_theta)
        self.scale = 1 / math.sqrt(d_h + d_r)  # a head's score spans both parts

    def new_cache(
        self,
        batch_size: int,
        max_seq_len: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> LatentKVCache:
        """An empty cache for this layer: ``d_c + d^R`` numbers per position."""
        w = self.w_dkv.weight
        return LatentKVCache(
            batch_size,
            max_seq_len or self.max_seq_len,
            self.kv_lora_rank,
            self.rope_head_dim,
            dtype=dtype or w.dtype,
            device=w.device,
        )

    def _project(self, x: Tensor, start: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Queries ``q^C, q^R`` and the cacheable ``c^KV, k^R`` of new tokens."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be (B, T, {self.d_model}), got {tuple(x.shape)}")
        B, T, _ = x.shape
        H, d_h, d_r = self.n_heads, self.head_dim, self.rope_head_dim
        c_q = self.q_norm(self.w_dq(x))  # (B, T, d_c')
        q_c = self.w_uq(c_q).view(B, T, H, d_h).transpose(1, 2)  # (B, H, T, d)
        q_r = self.w_qr(c_q).view(B, T, H, d_r).transpose(1, 2)  # (B, H, T, d^R)
        c_kv = self.kv_norm(self.w_dkv(x)).unsqueeze(1)  # (B, 1, T, d_c)
        k_r = self.w_kr(x).unsqueeze(1)  # (B, 1, T, d^R)
        return q_c, self.rope(q_r, start), c_kv, self.rope(k_r, start)

    def forward(self, x: Tensor, cache: LatentKVCache | None = None) -> Tensor:
        """Naive MLA: up-project every cached latent to per-head keys and values.

        Args:
            x: hidden states of ``T`` new tokens, shape ``(B, T, h)``.
            cache: this layer's latent cache; the new latents are appended to it.

        Returns:
            Shape ``(B, T, h)``.

        Raises:
            ValueError: ``x`` is not ``(B, T, h)``, the cache does not fit or would
                overflow, or positions run past the RoPE table.
        """
        start = 0 if cache is None else cache.length
        q_c, q_r, c_kv, k_r = self._project(x, start)
        if cache is not None:
            c_kv, k_r = cache.update(c_kv, k_r)  # (B, 1, T_kv, d_c), (B, 1, T_kv, d^R)
        B, H, T, d_h = q_c.shape
        S = c_kv.shape[2]
        k_c = self.w_uk(c_kv[:, 0]).view(B, S, H, d_h).transpose(1, 2)  # (B,H,T_kv,d)
        v = self.w_uv(c_kv[:, 0]).view(B, S, H, d_h).transpose(1, 2)  # (B,H,T_kv,d)
        q = torch.cat([q_c, q_r], dim=-1)  # (B, H, T, d + d^R)
        k = torch.cat([k_c, k_r.expand(B, H, S, -1)], dim=-1)  # (B, H, T_kv, d + d^R)
        o = grouped_attention(q, k, v, start, self.scale, self.window)  # (B, H, T, d)
        return self.w_o(o.transpose(1, 2).reshape(B, T, H * d_h))  # (B, T, h)

    def forward_absorbed(self, x: Tensor, cache: LatentKVCache) -> Tensor:
        """MLA with ``W^UK`` absorbed into the query and ``W^UV`` into the output.

        Per head, ``q^C . (W^UK c^KV) = (W^UK^T q^C) . c^KV`` and
        ``W^O_h W^UV_h (sum_s p_s c^KV_s)`` equals the naive output, so no key or value
        is ever up-projected: the score and the weighted sum run over the cached
        latents. The products are taken in this order, as in DeepSeek-V3's
        inference code, rather than by merging ``W^UQ W^UK`` into one matrix,
        which would hold ``H d_c' d_c`` numbers instead of ``H d (d_c' + d_c)``.

        Args:
            x: hidden states of ``T`` new tokens, shape ``(B, T, h)``.
            cache: this layer's latent cache (required: it is what attention reads).

        Returns:
            Shape ``(B, T, h)``, equal to :meth:`forward` up to rounding.

        Raises:
            ValueError: as :meth:`forward`.
        """
        # region absorb-uk
        start = cache.length
        q_c, q_r, c_kv, k_r = self._project(x, start)
        c_kv, k_r = cache.update(c_kv, k_r)  # (B, 1, T_kv, d_c), (B, 1, T_kv, d^R)
        B, H, T, d_h = q_c.shape
        w_uk = self.w_uk.weight.view(H, d_h, self.kv_lora_rank)  # W^UK per head
        w_uv = self.w_uv.weight.view(H, d_h, self.kv_lora_rank)  # W^UV per head
        q_latent = torch.einsum("bhtd,hdc->bhtc", q_c, w_uk)  # (B, H, T, d_c)
        q = torch.cat([q_latent, q_r], dim=-1)  # (B, H, T, d_c + d^R)
        k = torch.cat([c_kv, k_r], dim=-1)  # (B, 1, T_kv, d_c + d^R): one shared head
        # endregion
        # region absorb-uv
        o_latent = grouped_attention(  # (B, H, T, d_c)
            q, k, c_kv, start, self.scale, self.window
        )
        o = torch.einsum("bhtc,hdc->bthd", o_latent, w_uv)  # (B, T, H, d)
        return self.w_o(o.reshape(B, T, H * d_h))  # (B, T, h)
