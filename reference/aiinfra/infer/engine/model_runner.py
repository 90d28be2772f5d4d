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
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra.infer.paged.attention import PagedKVCache
from aiinfra.models.attention.gqa import GroupedQueryAttention
from aiinfra.models.layers import RMSNorm, RotaryEmbedding
from aiinfra.models.transformer import Transformer

__all__ = ["AttentionGroup", "Chunk", "PagedModelRunner", "StepLayout"]


@dataclass(frozen=True)
class Chunk:
    """The new tokens of one sequence in an iteration.

    ``tokens`` sit at positions ``start .. start + len(tokens) - 1``; the sequence's
    first ``start + len(tokens)`` positions live in the blocks of ``block_table``.
    """

    tokens: Sequence[int]
    start: int
    block_table: Sequence[int]


class StepLayout:
    """Where every token of a packed iteration reads and writes (shared by layers).

    Built with a handful of tensor operations, whatever the number of sequences: the
    block tables are padded into one ``(S, n_blk)`` tensor and every index (position,
    write slot, last token) is computed from it at once.

    Args:
        chunks: the iteration's chunks, ``S >= 1`` of them.
        block_size: ``B``.
        num_blocks: blocks in the pool.
        device: where the index tensors live.

    Raises:
        ValueError: an empty chunk, a negative start, or a block table that is too
            short or names a block outside the pool.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        block_size: int,
        num_blocks: int,
        device: torch.device,
    ) -> None:
        if not chunks:
            raise ValueError("chunks must hold at least one chunk")
        B = block_size
        T = [len(c.tokens) for c in chunks]  # T_s
        L = [c.start + t for c, t in zip(chunks, T, strict=True)]  # L_s
        for i, c in enumerate(chunks):
            if T[i] == 0 or c.start < 0:
                raise ValueError(
                    f"chunks[{i}] must have >= 1 token and start >= 0, got "
                    f"{T[i]} tokens at {c.start}"
                )
            need = -(-L[i] // B)
            if need > len(c.block_table) or not all(
                0 <= b < num_blocks for b in c.block_table[:need]
            ):
                raise ValueError(
                    f"chunks[{i}]: positions up to {L[i] - 1} need {need} blocks in "
                    f"[0, {num_blocks}), the table is {list(c.block_table)}"
                )
        # region layout
        need_of = [-(-n // B) for n in L]  # blocks holding each sequence
        n_blk = max(need_of)
        table = torch.tensor(  # (S, n_blk): each block table, padded with block 0
            [
                [*c.block_table[:n], *[0] * (n_blk - n)]
                for c, n in zip(chunks, need_of, strict=True)
            ]
        )
        n_new = torch.tensor(T)  # (S,)
        seq = torch.repeat_interleave(torch.arange(len(chunks)), n_new)  # (N,)
        ends = n_new.cumsum(0)  # (S,)
        starts = torch.tensor([c.start for c in chunks])  # (S,)
        positions = starts[seq] + torch.arange(int(ends[-1])) - (ends - n_new)[seq]
        self.tokens = torch.tensor([t for c in chunks for t in c.tokens], device=device)
        self.positions = positions.to(device)  # (N,)
        self.write_slots = (  # (N,): block * B + offset of each new token
            table[seq, positions // B] * B + positions % B
        ).to(device)
        self.last = (ends - 1).to(device)  # (S,): packed index of each last token
        # Attention groups of equal T_s: all decodes together, each longer chunk on
        # its own, so that no query is padded.
        decodes = [s for s, t in enumerate(T) if t == 1]
        groups = ([decodes] if decodes else []) + [
            [s] for s, t in enumerate(T) if t > 1
        ]
        self.groups = [
            AttentionGroup(torch.tensor(g), table, starts, ends, n_new, B, device)
            for g in groups
        ]
        # endregion
        self.num_seqs, self.num_tokens = len(chunks), len(self.tokens)
        self._where = {s: (i, j) for i, g in enumerate(groups) for j, s in enumerate(g)}
        self._lengths = list(zip(T, L, strict=True))
        self._rotation: dict[int, Tensor] = {}

    def rotation(self, rope: RotaryEmbedding) -> Tensor:
        """``cos + i sin`` of every token's RoPE angles, ``(N, d/2)``, once per step.

        Raises:
            ValueError: a position past the table of ``rope``.
        """
        if id(rope) not in self._rotation:
            if int(self.positions.max()) >= rope.max_seq_len:
                raise ValueError(
                    f"positions reach {int(self.positions.max())}, the RoPE table "
                    f"has {rope.max_seq_len}"
                )
            cos, sin = rope.cos[self.positions], rope.sin[self.positions]
            self._rotation[id(rope)] = torch.complex(cos, sin)  # (N, d/2)
        return self._rotation[id(rope)]

    def visible_of(self, s: int, window: int = 0) -> Tensor:
        """The keys each new token of sequence ``s`` sees, ``(T_s, L_s)``."""
        i, j = self._where[s]
        T, L = self._lengths[s]
        return self.groups[i].visible(window)[j, :T, :L]


class AttentionGroup:
    """Sequences with the same number ``T`` of new tokens, attending together.

    Args:
        seqs: the group's sequences (indices into the step), ``(S_g,)``.
        table: the step's padded block tables, ``(S, n_blk)``.
        starts: each sequence's first new position, ``(S,)``.
        ends: each sequence's packed end index (exclusive), ``(S,)``.
        n_new: each sequence's new tokens ``T_s``, ``(S,)``.
        block_size: ``B``.
        device: where the index tensors live.
    """

    def __init__(
        self,
        seqs: Tensor,
        table: Tensor,
        starts: Tensor,
        ends: Tensor,
        n_new: Tensor,
        block_size: int,
        device: torch.device,
    ) -> None:
        T = int(n_new[seqs[0]])
        L = starts[seqs] + T  # (S_g,): L_s
        n_blk = -(-int(L.max()) // block_size)
        self.block_size = block_size
        self.block_table = table[seqs, :n_blk].to(device)  # (S_g, n_blk)
        col = torch.arange(T)  # (T,)
        self.rows = ((ends - n_new)[seqs][:, None] + col).flatten().to(device)
        # Whether the group is the whole step, its rows in packed order.
        self.all_rows = len(self.rows) == int(ends[-1]) and bool(
            (self.rows == torch.arange(len(self.rows), device=device)).all()
        )
        self.query_pos = (starts[seqs][:, None] + col).to(device)  # (S_g, T)
        self.key_pos = torch.arange(n_blk * block_size, device=device)  # (L_max,)
        self._visible: dict[int, Tensor] = {}
        self._bias: dict[tuple[int, int, torch.dtype], Tensor] = {}

    @property
    def key_slots(self) -> Tensor:
        """The flat slot of every key position read, ``(S_g, L_max)``."""
        B = self.block_size
        return (self.block_table[:, :, None] * B + torch.arange(B)).flatten(1)

    def visible(self, window: int = 0) -> Tensor:
        """Which keys each query sees, shape ``(S_g, T, L_max)``."""
        if window not in self._visible:  # computed once per step, not per layer
            q, k = self.query_pos[:, :, None], self.key_pos[None, None, :]
            seen = k <= q
            if window:
                seen &= k > q - window
            self._visible[window] = seen
        return self._visible[window]

    def bias(self, window: int, r: int, dtype: torch.dtype) -> Tensor:
        """The additive mask of :meth:`visible` for ``r`` query heads per KV head.

        Shape ``(S_g, 1, T r, L_max)``: 0 where a key is seen, ``-inf`` elsewhere;
        made once per step and kept for every layer.
        """
        if (window, r, dtype) not in self._bias:
            seen = self.visible(window)  # (S_g, T, L_max)
            S, T, L = seen.shape
            bias = torch.zeros(seen.shape, dtype=dtype, device=seen.device)
            bias = bias.masked_fill(~seen, float("-inf"))
            self._bias[window, r, dtype] = (
                bias[:, None, :, None, :].expand(S, 1, T, r, L).reshape(S, 1, T * r, L)
            )
        return self._bias[window, r, dtype]


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
