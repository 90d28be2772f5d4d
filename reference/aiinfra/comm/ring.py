"""Ring all-reduce: a reduce-scatter followed by an all-gather around a ring.

The p ranks sit on a ring; rank r sends only to its right neighbour r + 1 and receives
only from its left neighbour r - 1 (mod p). The vector of n bytes is cut into p chunks.
In the reduce-scatter, partial results travel p - 1 steps around the ring: at step s,
rank r sends its partial reduction of chunk r - s - 1 and adds its own contribution to
chunk r - s - 2 arriving from the left, so after p - 1 steps it holds chunk r reduced
over all ranks. The all-gather then passes the finished chunks round for p - 1 more
steps. Each rank sends 2(p - 1) messages of n/p bytes: time
2(p-1) alpha + 2((p-1)/p) n beta + ((p-1)/p) n gamma (Thakur, Rabenseifner & Gropp
2005), bandwidth-optimal for large n (Patarasuk & Yuan 2009). Chunks come from
``torch.tensor_split``, so its length need not be a multiple of p. With
``segments`` > 1 each chunk travels as that many pieces, pipelined: a piece moves on
as soon as it is reduced, while the next one is in flight (gloo's ring does the same;
NCCL's kernels move a chunk as slices). Notation: p ranks, r this rank's group rank,
n bytes, c_i chunk i.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra import checks
from aiinfra.comm._validate import (
    check_output_input,
    check_same_on_all_ranks,
    check_tensor,
    group_rank_and_size,
    resolve_op,
)
from aiinfra.comm.primitives import REDUCE_FNS, combine_, isendrecv, sendrecv

SEGMENTS = 1  # pieces per chunk of the public ring collectives (1: textbook)


def ring_reduce_scatter_chunks(
    chunks: Sequence[Tensor],
    op: str,
    group: dist.ProcessGroup | None = None,
    segments: int = 1,
    out: Tensor | None = None,
) -> Tensor:
    """Reduce-scatter p chunks around the ring; return chunk r reduced over all ranks.

    The building block of every ring collective here; it trusts its caller to have
    validated the input. ``chunks`` is left unchanged, except ``chunks[r]`` when it
    is ``out`` (an in-place all-reduce).

    Args:
        chunks: p contiguous 1-D tensors (c_0, ..., c_{p-1}), possibly of unequal
            sizes; every rank passes the same sizes.
        op: ``"sum"``, ``"prod"``, ``"max"`` or ``"min"``.
        group: process group; ``None`` means the world.
        segments: 1 runs the textbook schedule, one message per step; more cuts
            each chunk into that many pieces and pipelines them
            (:func:`_pipelined_reduce_scatter`).
        out: a tensor shaped like ``chunks[r]`` that receives the result, or
            ``None``.

    Returns:
        ``out``, or if it is ``None`` a tensor shaped like ``chunks[r]``: (op) of c_r
        over all ranks, possibly a view of a scratch buffer (of ``chunks[0]``
        itself when p = 1): copy it out.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    if segments > 1 and p > 1:
        out = torch.empty_like(chunks[r]) if out is None else out
        _pipelined_reduce_scatter(chunks, op, group, segments, out)
        return out
    right, left = (r + 1) % p, (r - 1) % p
    # region reduce-scatter
    # Two receive buffers, allocated once and used in turn: one is being sent while
    # the other receives (a fresh buffer per step costs page faults, ~2x on gloo).
    m = max(c.numel() for c in chunks)
    bufs = torch.empty(2, m, dtype=chunks[0].dtype, device=chunks[0].device)  # (2, m)
    acc = chunks[(r - 1) % p]  # our part of c_{r-1}, the first to send (not copied)
    for s in range(p - 1):
        i = (r - s - 2) % p  # the chunk arriving from the left at step s
        recv = bufs[s % 2, : chunks[i].numel()]  # (|c_i|,)
        sendrecv(acc, right, recv, left, group)
        acc = combine_(recv, chunks[i], op)  # add our part, pass it on next step
    # endregion
    return acc if out is None else out.copy_(acc)  # c_r, reduced over all p ranks


def _pipelined_reduce_scatter(
    chunks: Sequence[Tensor],
    op: str,
    group: dist.ProcessGroup | None,
    segments: int,
    out: Tensor,
) -> None:
    """The ring reduce-scatter with each chunk cut into ``segments`` pieces.

    Piece j moves on as soon as it is reduced, while the later pieces of the same
    step are still arriving: the reduction of one piece overlaps the transfer of
    the next, and no rank waits for a whole chunk before sending (gloo's ring does
    the same with two pieces or more per chunk). The last step reduces straight
    into ``out``, which may be ``chunks[r]`` itself: no copy and no new buffer.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    right, left = (r + 1) % p, (r - 1) % p
    pieces = [c.tensor_split(segments) for c in chunks]  # pieces[i][j]
    m = max(x.numel() for x in pieces[0])  # pieces of c_0 are the largest
    bufs = chunks[0].new_empty(2, segments, m)  # one slot per piece, used in turn
    outs = out.tensor_split(segments)

    # region pipelined-reduce-scatter
    def slot(s: int, j: int) -> Tensor:  # where piece j of step s arrives
        return bufs[s % 2, j, : pieces[(r - s - 2) % p][j].numel()]

    first = pieces[(r - 1) % p]  # our part of c_{r-1} goes out, piece by piece
    work = [isendrecv(x, right, slot(0, j), left, group) for j, x in enumerate(first)]
    for s in range(p - 1):
        mine = pieces[(r - s - 2) % p]  # our part of the chunk arriving at step s
        last = s == p - 2  # at the last step the chunk is c_r: reduce into out
        for j in range(segments):
            for w in work[j]:  # piece j has arrived and our previous piece j is out
                w.wait()
            done = outs[j] if last else slot(s, j)
            REDUCE_FNS[op](slot(s, j), mine[j], out=done)
            if not last:  # pass it on at once; receive piece j of the next step
                work[j] = isendrecv(done, right, slot(s + 1, j), left, group)
    # endregion


def ring_all_gather_chunks(
    chunks: Sequence[Tensor],
    group: dist.ProcessGroup | None = None,
    segments: int = 1,
) -> None:
    """All-gather p chunks around the ring, in place: chunk r is sent to every rank.

    Args:
        chunks: p contiguous 1-D views (possibly of unequal sizes) of one buffer;
            ``chunks[r]`` holds this rank's data on entry, all chunks on return.
        group: process group; ``None`` means the world.
        segments: 1 sends whole chunks; more pipelines that many pieces per chunk,
            each forwarded as soon as it has arrived.
    """
    r, p = dist.get_rank(group), dist.get_world_size(group)
    right, left = (r + 1) % p, (r - 1) % p
    if segments > 1 and p > 1:
        _pipelined_all_gather(chunks, group, segments)
        return
    # region all-gather
    for s in range(p - 1):
        # Forward the chunk received in the previous step (our own at s = 0).
        sendrecv(chunks[(r - s) % p], right, chunks[(r - s - 1) % p], left, group)
    # endregion


def _pipelined_all_gather(
    chunks: Sequence[Tensor], group: dist.ProcessGroup | None, segments: int
) -> None:
    """The ring all-gather with each chunk cut into ``segments`` pieces."""
    r, p = dist.get_rank(group), dist.get_world_size(group)
    right, left = (r + 1) % p, (r - 1) % p
    pieces = [c.tensor_split(segments) for c in chunks]  # pieces[i][j]
    # region pipelined-all-gather
    mine, first = pieces[r], pieces[(r - 1) % p]  # send ours, receive c_{r-1}
    work = [isendrecv(mine[j], right, first[j], left, group) for j in range(segments)]
    for s in range(p - 1):
        got, nxt = pieces[(r - s - 1) % p], pieces[(r - s - 2) % p]
        for j in range(segments):
            for w in work[j]:
                w.wait()
            if s < p - 2:  # forward piece j while the others still arrive
                work[j] = isendrecv(got[j], right, nxt[j], left, group)
    # endregion


def ring_all_reduce(
    tensor: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
    segments: int = SEGMENTS,
) -> None:
    """All-reduce ``tensor`` in place with the ring algorithm, like ``dist.all_reduce``.

    Args:
        tensor: contiguous tensor of any shape and any numel >= 1; on return it
            holds the reduction over all ranks of ``group``, identical on each.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange (numel, dtype, op) so that a mismatch
            between ranks raises on every rank instead of hanging.
        segments: pieces per chunk: 1 is the textbook schedule, more pipelines
            them (the reduction of one piece overlaps the transfer of the next).

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            ``segments`` not an integer >= 1; this rank not in ``group``; numel,
            dtype or op differing across ranks.
    """
    op = resolve_op(op)
    checks.positive_int("segments", segments)
    check_tensor(tensor, "tensor")
    r, p = group_rank_and_size(group)
    if check_consistency:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "op": op}, group, tensor.device)
    # region ring-all-reduce
    chunks = tensor.view(-1).tensor_split(p)  # p chunks of n // p or n // p + 1
    ring_reduce_scatter_chunks(chunks, op, group, segments, out=chunks[r])
    ring_all_gather_chunks(chunks, group, segments)
    # endregion


def ring_reduce_scatter(
    output: Tensor,
    input: Tensor,
    op: str | dist.ReduceOp = "sum",
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
    segments: int = SEGMENTS,
) -> None:
    """Reduce ``input`` over ranks, block r to rank r: ``dist.reduce_scatter_tensor``.

    Args:
        output: contiguous tensor of m elements; receives block r (elements
            [r m, (r + 1) m) of the flattened input) reduced over all ranks.
        input: contiguous tensor of p * m elements, same dtype; not modified.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange sizes, dtype and op across ranks.
        segments: pieces per block, as in :func:`ring_all_reduce`.

    Raises:
        TypeError: a non-tensor or unsupported dtype; ``output`` and ``input`` of
            different dtypes.
        ValueError: an unsupported ``op``; an empty or non-contiguous tensor;
            ``segments`` not an integer >= 1; this rank not in ``group``;
            ``input.numel() != p * output.numel()``; sizes, dtype or op differing
            across ranks.
    """
    op = resolve_op(op)
    checks.positive_int("segments", segments)
    check_output_input(output, input)
    r, p = group_rank_and_size(group)
    if input.numel() != p * output.numel():
        raise ValueError(
            f"input.numel() must be group size {p} x output.numel() "
            f"{output.numel()}, got {input.numel()}"
        )
    if check_consistency:
        fields = {"output.numel()": output.numel(), "output.dtype": output.dtype}
        check_same_on_all_ranks({**fields, "op": op}, group, output.device)
    chunks = input.view(-1).tensor_split(p)  # p blocks of m elements
    ring_reduce_scatter_chunks(chunks, op, group, segments, out=output.view(-1))


def ring_all_gather(
    output: Tensor,
    input: Tensor,
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
    segments: int = SEGMENTS,
) -> None:
    """Concatenate all ranks' ``input`` in ``output``: ``dist.all_gather_into_tensor``.

    Args:
        output: contiguous tensor of p * m elements; block j receives rank j's input.
        input: contiguous tensor of m elements, same dtype; may be block r of
            ``output`` (the in-place form).
        group: process group; ``None`` means the world.
        check_consistency: first exchange sizes and dtype across ranks.
        segments: pieces per block, as in :func:`ring_all_reduce`.

    Raises:
        TypeError: a non-tensor or unsupported dtype; ``output`` and ``input`` of
            different dtypes.
        ValueError: an empty or non-contiguous tensor; ``segments`` not an integer
            >= 1; this rank not in ``group``; ``output.numel() != p *
            input.numel()``; sizes or dtype differing across ranks.
    """
    check_output_input(output, input)
    checks.positive_int("segments", segments)
    r, p = group_rank_and_size(group)
    if output.numel() != p * input.numel():
        raise ValueError(
            f"output.numel() must be group size {p} x input.numel() "
            f"{input.numel()}, got {output.numel()}"
        )
    if check_consistency:
        fields = {"input.numel()": input.numel(), "input.dtype": input.dtype}
        check_same_on_all_ranks(fields, group, input.device)
    chunks = output.view(-1).tensor_split(p)  # p blocks of m elements
    chunks[r].copy_(input.view(-1))
    ring_all_gather_chunks(chunks, group, segments)
