"""Where every token of a packed engine iteration reads and writes its keys and values.

An iteration packs the new tokens of ``S`` sequences into one row of ``N`` tokens:
decodes feed one token, prompt chunks many, each at its own positions, its keys and
values in the blocks of its block table (vLLM's layout, Kwon et al. 2023).
:class:`StepLayout` computes, once per step and for every layer, each token's
position, the slot it writes, the packed index of each sequence's last token, and
the :class:`AttentionGroup` s whose queries attend together (all decodes, then each
longer chunk), with their block tables and causal masks. Notation: ``N`` packed
tokens, ``S`` sequences, ``T_s`` new tokens and ``L_s`` cached positions (the new
ones included) of sequence ``s``, ``B`` block size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from aiinfra.models.layers import RotaryEmbedding

__all__ = ["AttentionGroup", "Chunk", "StepLayout"]


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
            AttentionGroup(
                g,
                T[g[0]],
                max(L[s] for s in g),
                table,
                starts,
                ends - n_new,
                B,
                device,
                whole=len(groups) == 1,  # the group is the step, in packed order
            )
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
        seqs: the group's sequences (indices into the step), ``S_g`` of them.
        T: new tokens of each of them.
        max_len: the longest ``L_s`` among them.
        table: the step's padded block tables, ``(S, n_blk)``.
        starts: each sequence's first new position, ``(S,)``.
        offsets: each sequence's first packed index, ``(S,)``.
        block_size: ``B``.
        device: where the index tensors live.
        whole: the group holds every sequence of the step, in packed order.
    """

    def __init__(
        self,
        seqs: Sequence[int],
        T: int,
        max_len: int,
        table: Tensor,
        starts: Tensor,
        offsets: Tensor,
        block_size: int,
        device: torch.device,
        whole: bool = False,
    ) -> None:
        n_blk = -(-max_len // block_size)
        index = torch.tensor(list(seqs))  # (S_g,)
        self.block_size, self.all_rows = block_size, whole
        self.block_table = table[index, :n_blk].to(device)  # (S_g, n_blk)
        col = torch.arange(T)  # (T,)
        if whole:  # rows 0 .. N-1: the queries need no gather, the output no scatter
            self.rows = torch.arange(len(seqs) * T, device=device)
        else:
            self.rows = (offsets[index][:, None] + col).flatten().to(device)
        self.query_pos = (starts[index][:, None] + col).to(device)  # (S_g, T)
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
