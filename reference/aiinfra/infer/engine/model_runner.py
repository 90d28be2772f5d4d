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

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiinfra.infer.paged.attention import PagedKVCache
from aiinfra.models.attention.gqa import GroupedQueryAttention
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
        for i, c in enumerate(chunks):
            end = c.start + len(c.tokens)
            if len(c.tokens) == 0 or c.start < 0:
                raise ValueError(
                    f"chunks[{i}] must have >= 1 token and start >= 0, got "
                    f"{len(c.tokens)} tokens at {c.start}"
                )
            if -(-end // block_size) > len(c.block_table) or any(
                not 0 <= b < num_blocks for b in c.block_table
            ):
                raise ValueError(
                    f"chunks[{i}]: positions up to {end - 1} need "
                    f"{-(-end // block_size)} blocks in [0, {num_blocks}), the table "
                    f"is {list(c.block_table)}"
                )
        # region layout
        B = block_size
        T = [len(c.tokens) for c in chunks]  # T_s
        offsets = [sum(T[:s]) for s in range(len(chunks))]  # first packed index
        self.tokens = torch.tensor(
            [t for c in chunks for t in c.tokens], device=device
        )  # (N,)
        self.positions = torch.cat(
            [torch.arange(c.start, c.start + len(c.tokens)) for c in chunks]
        ).to(device)  # (N,)
        self.write_slots = torch.cat(
            [_slots(c.block_table, c.start, c.start + len(c.tokens), B) for c in chunks]
        ).to(device)  # (N,): block * B + offset of each new token
        self.last = torch.tensor(
            [o + t - 1 for o, t in zip(offsets, T, strict=True)], device=device
        )  # (S,): the packed index of each chunk's last token
        # Attention groups: all decodes together, each longer chunk on its own, so
        # that no decode is padded to a prompt chunk's length.
        decodes = [s for s, t in enumerate(T) if t == 1]
        groups = ([decodes] if decodes else []) + [
            [s] for s, t in enumerate(T) if t > 1
        ]
        self.groups = [
            AttentionGroup([chunks[s] for s in g], [offsets[s] for s in g], B, device)
            for g in groups
        ]
        # endregion
        self.num_seqs, self.num_tokens = len(chunks), len(self.tokens)
        self._where = {s: (i, j) for i, g in enumerate(groups) for j, s in enumerate(g)}
        self._lengths = [(t, c.start + t) for c, t in zip(chunks, T, strict=True)]

    def visible_of(self, s: int, window: int = 0) -> Tensor:
        """The keys each new token of sequence ``s`` sees, ``(T_s, L_s)``."""
        i, j = self._where[s]
        T, L = self._lengths[s]
        return self.groups[i].visible(window)[j, :T, :L]


def _slots(table: Sequence[int], start: int, end: int, block_size: int) -> Tensor:
    """Flat slots ``block * B + offset`` of positions ``start .. end - 1``."""
    pos = torch.arange(start, end)
    blocks = torch.tensor(list(table), dtype=torch.long)[pos // block_size]
    return blocks * block_size + pos % block_size


class AttentionGroup:
    """Sequences whose queries are padded together to ``(S_g, T_max)``.

    Args:
        chunks: the group's chunks.
        offsets: the packed index of each chunk's first token.
        block_size: ``B``.
        device: where the index tensors live.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        offsets: Sequence[int],
        block_size: int,
        device: torch.device,
    ) -> None:
        T = torch.tensor([len(c.tokens) for c in chunks])  # (S_g,)
        L = [c.start + len(c.tokens) for c in chunks]  # L_s
        col = torch.arange(int(T.max()))  # (T_max,)
        self.query_valid = (col < T[:, None]).to(device)  # (S_g, T_max)
        self.query_index = (torch.tensor(list(offsets))[:, None] + col).to(
            device
        )  # (S_g, T_max): packed index of each query (padding: masked)
        self.rows = self.query_index[self.query_valid]  # packed order
        self.query_index = self.query_index.clamp(max=int(self.rows.max()))
        starts = torch.tensor([c.start for c in chunks])
        self.query_pos = (starts[:, None] + col).to(device)  # (S_g, T_max)
        self.key_pos = torch.arange(max(L), device=device)  # (L_max,)
        self._visible: dict[int, Tensor] = {}
        # Keys past a sequence's length read slot 0, hidden by the causal mask.
        self.key_slots = torch.stack(
            [
                torch.cat(
                    [
                        _slots(c.block_table, 0, n, block_size),
                        torch.zeros(max(L) - n, dtype=torch.long),
                    ]
                )
                for c, n in zip(chunks, L, strict=True)
            ]
        ).to(device)  # (S_g, L_max)

    def visible(self, window: int = 0) -> Tensor:
        """Which keys each padded query sees, shape ``(S_g, T_max, L_max)``."""
        if window not in self._visible:  # computed once per step, not per layer
            q, k = self.query_pos[:, :, None], self.key_pos[None, None, :]
            seen = (k <= q) & self.query_valid[:, :, None]
            if window:
                seen &= k > q - window
            self._visible[window] = seen
        return self._visible[window]


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
            x = x + self._attention(block.attn, block.attn_norm(x)[0], cache, lay)
            x = x + block.mlp(block.mlp_norm(x))  # (1, N, h)
        return m.head(m.norm(x[0, lay.last]))  # (S, V): last token of each chunk

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
        q = attn.wq(x).view(N, H, D).transpose(0, 1)  # (H, N, d)
        k = attn.wk(x).view(N, G, D).transpose(0, 1)  # (G, N, d)
        v = attn.wv(x).view(N, G, D)  # (N, G, d)
        if attn.rope is not None:
            q = attn.rope(q, positions=lay.positions)
            k = attn.rope(k, positions=lay.positions)
        flat_k = cache.k_cache.view(-1, G, D)  # (N_blk * B, G, d)
        flat_v = cache.v_cache.view(-1, G, D)
        flat_k[lay.write_slots] = k.transpose(0, 1).to(flat_k.dtype)  # write first
        flat_v[lay.write_slots] = v.to(flat_v.dtype)
        q = q.transpose(0, 1)  # (N, H, d)
        out = q.new_empty(N, H * D)
        for grp in lay.groups:  # the decodes, then each prompt chunk
            keys = flat_k[grp.key_slots].to(q.dtype)  # (S_g, L_max, G, d)
            values = flat_v[grp.key_slots].to(q.dtype)  # (S_g, L_max, G, d)
            S, T_max = grp.query_index.shape
            queries = q[grp.query_index].view(S, T_max, G, H // G, D)
            scores = torch.einsum("stgrd,slgd->sgrtl", queries, keys) / math.sqrt(D)
            seen = grp.visible(attn.window)[:, None, None]  # (S_g, 1, 1, T_max, L_max)
            scores = scores.masked_fill(~seen, float("-inf"))
            wide = torch.promote_types(scores.dtype, torch.float32)  # fp32 or wider
            p = torch.softmax(scores.to(wide), dim=-1).type_as(values)
            p = p.nan_to_num(0.0)  # padded query rows see no key
            o = torch.einsum("sgrtl,slgd->stgrd", p, values)  # (S_g, T_max, G, H/G, d)
            out[grp.rows] = o.reshape(S, T_max, H * D)[grp.query_valid]
        # endregion
        return attn.wo(out)[None]  # (1, N, h)
