"""One forward pass over a whole engine iteration, its KV cache in paged blocks.

A serving iteration mixes sequences at different stages: decodes feed one token,
prompt chunks feed many, each at its own positions. :class:`PagedModelRunner` packs
all of them into one row of ``N`` tokens (no padding in the linear layers, which
hold almost all the FLOPs and read every weight once for the whole batch), and keeps
the keys and values of every sequence in one :class:`~aiinfra.infer.paged.attention.
PagedKVCache` per layer, found through the block tables of the
:class:`~aiinfra.infer.paged.block_allocator.BlockAllocator` (vLLM's layout, Kwon et al.
2023). In each layer the ``N`` new keys and values are written to their slots
first; then each sequence's queries attend over its blocks, causally: the query at
position ``p`` sees the keys at ``0 .. p`` (and, with a sliding window, only the
latest ``W``). Only the last token of each chunk goes through the output head: the
other positions of a prompt need no logits. Notation: ``N`` packed tokens, ``S``
sequences, ``T_s`` new tokens and ``L_s`` cached positions (the new ones included)
of sequence ``s``, ``B`` block size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra.infer.engine.layout import Chunk, StepLayout
from aiinfra.infer.paged.attention import PagedKVCache
from aiinfra.models.attention.gqa import GroupedQueryAttention
from aiinfra.models.layers import RMSNorm
from aiinfra.models.transformer import Transformer

__all__ = ["PagedModelRunner"]


def _rotate(x: Tensor, rotation: Tensor) -> Tensor:
    """RoPE on ``x`` ``(..., N, d)``: each pair of features times ``cos + i sin``.

    The pairs ``(x_{2i}, x_{2i+1})`` are complex numbers; one complex product per
    pair is the rotation that :class:`RotaryEmbedding` writes out in real
    arithmetic, in fp32 or wider as it does.
    """
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    pairs = torch.view_as_complex(wide.unflatten(-1, (-1, 2)))  # (..., N, d/2)
    turned = pairs * rotation.to(pairs.dtype)
    return torch.view_as_real(turned).flatten(-2).to(x.dtype)  # (..., N, d)


def _norm(norm: torch.nn.Module, x: Tensor) -> Tensor:
    """``norm(x)``; an fp32/fp64 RMSNorm as one ``F.rms_norm`` call (same formula)."""
    if type(norm) is RMSNorm and x.dtype in (torch.float32, torch.float64):
        return F.rms_norm(x, (x.shape[-1],), norm.weight, norm.eps)
    return norm(x)


class PagedModelRunner:
    """Runs a :class:`Transformer` over packed iterations, its caches in blocks.

    Args:
        model: a grouped-query-attention model (every block's attention a
            :class:`GroupedQueryAttention`), in evaluation mode.
        num_blocks: blocks per layer's cache.
        block_size: token slots per block.

    Raises:
        TypeError: ``model`` is not a :class:`Transformer`.
        ValueError: its attention is not grouped-query attention (multi-head
            latent attention caches a latent, not keys and values).
    """

    def __init__(self, model: Transformer, num_blocks: int, block_size: int) -> None:
        if not isinstance(model, Transformer):
            raise TypeError(f"model must be an aiinfra Transformer, got {type(model)}")
        if not all(isinstance(b.attn, GroupedQueryAttention) for b in model.blocks):
            raise ValueError(
                "the paged runner needs grouped-query attention in every block; this "
                "model uses multi-head latent attention (kv_lora_rank > 0)"
            )
        w = model.embed.weight
        self.model, self.block_size, self.num_blocks = model, block_size, num_blocks
        self._qkv = {  # per layer: W_q, W_k, W_v (and biases) stacked, as vLLM does
            id(b.attn): (
                torch.cat([b.attn.wq.weight, b.attn.wk.weight, b.attn.wv.weight]),
                None
                if b.attn.wq.bias is None
                else torch.cat([b.attn.wq.bias, b.attn.wk.bias, b.attn.wv.bias]),
            )
            for b in model.blocks
        }
        self.caches = [
            PagedKVCache(
                num_blocks,
                block_size,
                b.attn.n_kv_heads,
                b.attn.head_dim,
                dtype=w.dtype,
                device=w.device,
            )
            for b in model.blocks
        ]

    def copy_block(self, src: int, dst: int) -> None:
        """Copy block ``src`` into ``dst`` in every layer (copy-on-write)."""
        for cache in self.caches:
            cache.copy_block(src, dst)

    @torch.no_grad()
    def forward(self, chunks: Sequence[Chunk]) -> Tensor:
        """Run one iteration; the logits after the last token of each chunk.

        Args:
            chunks: the iteration's work, one chunk per sequence.

        Returns:
            Logits, shape ``(S, V)``.

        Raises:
            ValueError: see :class:`StepLayout`; or a token outside the vocabulary
                or a position past ``max_seq_len``.
        """
        m, cfg = self.model, self.model.config
        lay = StepLayout(
            chunks, self.block_size, self.num_blocks, m.embed.weight.device
        )
        if not bool(((lay.tokens >= 0) & (lay.tokens < cfg.vocab_size)).all()):
            raise ValueError(f"token ids must be in [0, {cfg.vocab_size})")
        if int(lay.positions.max()) >= cfg.max_seq_len:
            raise ValueError(
                f"positions reach {int(lay.positions.max())}, the model has "
                f"max_seq_len {cfg.max_seq_len}"
            )
        # region packed-forward
        x = m.embed(lay.tokens)[None]  # (1, N, h)
        if m.pos_embed is not None:
            x = x + m.pos_embed(lay.positions)  # (1, N, h)
        for block, cache in zip(m.blocks, self.caches, strict=True):
            x = x + self._attention(
                block.attn, _norm(block.attn_norm, x)[0], cache, lay
            )
            x = x + block.mlp(_norm(block.mlp_norm, x))  # (1, N, h)
        return m.head(_norm(m.norm, x[0, lay.last]))  # (S, V): last token of each

    def _attention(
        self,
        attn: GroupedQueryAttention,
        x: Tensor,
        cache: PagedKVCache,
        lay: StepLayout,
    ) -> Tensor:
        """The attention of one layer over packed tokens ``x`` ``(N, h)``."""
        # region paged-attention
        N, H, G, D = x.shape[0], attn.n_heads, attn.n_kv_heads, attn.head_dim
        r = H // G  # query heads per KV head
        w, b = self._qkv[id(attn)]  # W_q, W_k, W_v stacked: one matmul
        qkv = F.linear(x, w, b).view(N, H + 2 * G, D).transpose(0, 1)  # (H+2G, N, d)
        if attn.rope is not None:  # queries and keys rotated in one call
            qk = _rotate(qkv[: H + G], lay.rotation(attn.rope))  # (H+G, N, d)
        else:
            qk = qkv[: H + G]
        q, k, v = qk[:H], qk[H:], qkv[H + G :].transpose(0, 1)  # v: (N, G, d)
        B = cache.block_size
        flat_k = cache.k_cache.view(-1, G, D)  # (N_blk * B, G, d)
        flat_v = cache.v_cache.view(-1, G, D)
        flat_k.index_copy_(0, lay.write_slots, k.transpose(0, 1).to(flat_k.dtype))
        flat_v.index_copy_(0, lay.write_slots, v.to(flat_v.dtype))  # write first
        q = q.transpose(0, 1)  # (N, H, d)
        out = q.new_empty(N, H * D)
        for grp in lay.groups:  # the decodes, then each prompt chunk
            S, T = grp.query_pos.shape
            n_blk = grp.block_table.shape[1]
            # Whole blocks through the block tables: (S_g, L_max, G, d), L_max = n_blk B
            blocks = grp.block_table.flatten()
            keys = cache.k_cache.index_select(0, blocks).view(S, n_blk * B, G, D)
            values = cache.v_cache.index_select(0, blocks).view(S, n_blk * B, G, D)
            # The r query heads of a KV head attend as r more query rows.
            mine = q if grp.all_rows else q.index_select(0, grp.rows)  # (S_g T, H, d)
            queries = mine.view(S, T, G, r, D).permute(0, 2, 1, 3, 4)
            o = F.scaled_dot_product_attention(
                queries.reshape(S, G, T * r, D),
                keys.transpose(1, 2).to(q.dtype),  # (S_g, G, L_max, d)
                values.transpose(1, 2).to(q.dtype),
                attn_mask=grp.bias(
                    attn.window, r, q.dtype
                ),  # (S_g, 1, T r, L_max): 0 or -inf
            )  # (S_g, G, T r, d)
            o = o.view(S, G, T, r, D).permute(0, 2, 1, 3, 4).reshape(S * T, H * D)
            if grp.all_rows:  # one group holds the whole step (all decodes)
                out = o
            else:
                out.index_copy_(0, grp.rows, o)
        # endregion
        return attn.wo(out)[None]  # (1, N, h)
