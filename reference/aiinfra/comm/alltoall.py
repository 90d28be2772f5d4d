"""Pairwise-exchange all-to-all: every rank sends a distinct block to every other rank.

All-to-all is a transpose across ranks: rank r's input is p blocks, block j goes to
rank j, and rank r's output block j comes from rank j. It is the communication of
expert parallelism (tokens to their experts and back) and of Ulysses sequence
parallelism. The pairwise-exchange algorithm takes p - 1 steps; in step k rank r
sends to (r + k) mod p and receives from (r - k) mod p, so every step is a
permutation and no rank receives two messages at once. Each rank sends (p - 1) blocks
of n/p bytes: time (p - 1) alpha + ((p - 1)/p) n beta, the algorithm MPICH uses
for long messages (Thakur, Rabenseifner & Gropp 2005). Notation: p ranks, r this
rank's group rank, n bytes per rank.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import Tensor

from aiinfra.comm._validate import (
    check_disjoint,
    check_output_input,
    check_same_on_all_ranks,
    group_rank_and_size,
)
from aiinfra.comm.primitives import sendrecv


def pairwise_all_to_all(
    output: Tensor,
    input: Tensor,
    group: dist.ProcessGroup | None = None,
    *,
    check_consistency: bool = True,
) -> None:
    """Exchange equal blocks between all ranks, like ``dist.all_to_all_single``.

    Args:
        output: contiguous tensor of m elements; block j (elements
            [j m/p, (j + 1) m/p) when flattened) receives block r of rank j's input.
        input: contiguous tensor of m elements, same dtype, m a multiple of p; block
            j is sent to rank j. Not modified, and must not share memory with
            ``output``.
        group: process group; ``None`` means the world.
        check_consistency: first exchange (numel, dtype) so that a mismatch between
            ranks raises on every rank instead of hanging.

    Raises:
        TypeError: a non-tensor or unsupported dtype; ``output`` and ``input`` of
            different dtypes.
        ValueError: an empty or non-contiguous tensor; this rank not in ``group``;
            ``output.numel() != input.numel()``; m not a multiple of p; ``output``
            sharing memory with ``input``; numel or dtype differing across ranks.
    """
    check_output_input(output, input)
    r, p = group_rank_and_size(group)
    if output.numel() != input.numel():
        raise ValueError(
            f"output.numel() {output.numel()} != input.numel() {input.numel()}"
        )
    if input.numel() % p != 0:
        raise ValueError(
            f"input.numel() {input.numel()} must be a multiple of group size {p} "
            "(equal splits)"
        )
    check_disjoint(output, "output", input, "input")
    if check_consistency:
        fields = {"input.numel()": input.numel(), "input.dtype": input.dtype}
        check_same_on_all_ranks(fields, group, input.device)
    send = input.view(-1).tensor_split(p)  # p blocks of n/p: block j goes to rank j
    recv = output.view(-1).tensor_split(p)  # p blocks of n/p: block j from rank j
    # region pairwise-exchange
    recv[r].copy_(send[r])  # our own block does not travel
    for k in range(1, p):
        dst, src = (r + k) % p, (r - k) % p
        sendrecv(send[dst], dst, recv[src], src, group)
    # endregion
