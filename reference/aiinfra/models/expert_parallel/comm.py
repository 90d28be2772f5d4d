"""Expert-parallel communication: tokens to their experts' ranks and back.

With expert parallelism (GShard, Lepikhin et al. 2021) the ``E`` experts of a MoE
layer are spread over the ``p`` ranks of a group, ``E/p`` contiguous experts each,
and every rank routes its own tokens. A token's hidden vector must then travel to
the rank that holds each expert it chose (*dispatch*), and the expert's output must
come back (*combine*). Both are one ``all_to_all_single`` whose splits are uneven:
rank r sends rank j as many rows as its tokens chose experts of rank j, which the
router decides afresh every step. The receivers learn those sizes first, from an
all-to-all of the per-expert counts. This file holds the placement, the split
sizes, and the differentiable all-to-all (its backward is the reverse exchange);
:mod:`aiinfra.models.expert_parallel.layer` builds the layer on them. Notation: ``E``
experts, ``K`` per token, ``p`` ranks, ``T`` tokens of this rank, ``h`` hidden.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra import checks
from aiinfra.comm.counter import PAPER_FACTOR, CommCounter


def check_expert_split(n_experts: int, ep_size: int) -> int:
    """Experts per rank, ``E/p``, when ``E`` experts are spread over ``p`` ranks.

    Args:
        n_experts: ``E``, routed experts of the layer.
        ep_size: ``p``, ranks of the expert-parallel group.

    Returns:
        ``E // p``.

    Raises:
        ValueError: either is not a positive integer, or ``p`` does not divide ``E``.
    """
    for name, value in (("n_experts", n_experts), ("ep_size", ep_size)):
        checks.positive_int(name, value)
    if n_experts % ep_size:
        raise ValueError(
            f"n_experts = {n_experts} must be divisible by the expert-parallel "
            f"size {ep_size}"
        )
    return n_experts // ep_size


def expert_owner(experts: Tensor, n_experts: int, ep_size: int) -> Tensor:
    """The group rank holding each expert: ``e // (E/p)`` (contiguous placement).

    Args:
        experts: expert indices, any shape, values in ``[0, E)``.
        n_experts: ``E``.
        ep_size: ``p``, which must divide ``E``.

    Returns:
        Ranks, same shape as ``experts``.
    """
    return experts // check_expert_split(n_experts, ep_size)


@dataclass(frozen=True)
class DispatchPlan:
    """Where this rank's kept token-expert assignments go, sorted by expert.

    Attributes:
        order: ``(S,)`` flat indices into the ``(T, K)`` routing of the kept
            assignments, sorted by expert (so by destination rank too).
        tokens: ``(S,)`` the token of each sorted assignment, ``order // K``.
        counts: ``(E,)`` kept assignments of this rank per expert.
        send: ``p`` row counts, rank j's share of the sorted rows.
    """

    order: Tensor
    tokens: Tensor
    counts: Tensor
    send: list[int]


def dispatch_plan(
    experts: Tensor, kept: Tensor, n_experts: int, ep_size: int
) -> DispatchPlan:
    """Sort this rank's kept assignments by expert and count them per rank.

    Args:
        experts: ``(T, K)`` chosen experts, int64 in ``[0, E)``.
        kept: ``(T, K)`` bool, False where capacity dropped the assignment.
        n_experts: ``E``.
        ep_size: ``p``, which must divide ``E``.

    Returns:
        The :class:`DispatchPlan`.

    Raises:
        ValueError: shapes differ, ``experts`` is not 2-D, or ``p`` does not
            divide ``E``.
    """
    per_rank = check_expert_split(n_experts, ep_size)
    if experts.dim() != 2 or kept.shape != experts.shape:
        raise ValueError(
            f"experts must be (T, K) and kept the same shape, got "
            f"{tuple(experts.shape)} and {tuple(kept.shape)}"
        )
    # region plan
    flat = experts.flatten()  # (T K,)
    slots = kept.flatten().nonzero().squeeze(1)  # (S,) kept assignments
    order = slots[flat[slots].argsort(stable=True)]  # (S,) by expert, then token
    counts = torch.bincount(flat[order], minlength=n_experts)  # (E,)
    send = counts.view(ep_size, per_rank).sum(1).tolist()  # p row counts
    # endregion
    return DispatchPlan(order, order // experts.shape[1], counts, send)


@dataclass
class AllToAllCounter(CommCounter):
    """A :class:`CommCounter` that also issues (and logs) ``all_to_all_single``.

    An all-to-all entry logs the elements that *leave* this rank (its own split
    stays), so ``sent_bytes()`` is what the rank puts on the wire.
    """

    def all_to_all_single(
        self,
        output: Tensor,
        input: Tensor,
        output_split_sizes: list[int] | None = None,
        input_split_sizes: list[int] | None = None,
    ) -> None:
        """``dist.all_to_all_single`` on the group; splits count rows (dim 0)."""
        row = math.prod(input.shape[1:])  # elements per row
        rows = input_split_sizes or [input.shape[0] // self.world_size] * (
            self.world_size
        )
        leaving = (sum(rows) - rows[self.rank]) * row
        self.log.append(("all_to_all", leaving, input.element_size()))
        dist.all_to_all_single(
            output, input, output_split_sizes, input_split_sizes, group=self.group
        )

    def sent_bytes(self, op: str = "all_to_all") -> int:
        """Bytes this rank sent to other ranks in the logged calls of ``op``."""
        return sum(n * size for name, n, size in self.log if name == op)

    def paper_elements(self) -> int:
        """As :class:`CommCounter`, an all-to-all counting its leaving elements."""
        return sum(PAPER_FACTOR.get(op, 1) * n for op, n, _ in self.log)


def exchange_counts(counts: Tensor, counter: AllToAllCounter) -> Tensor:
    """Tell every rank how many rows it will receive for each of its experts.

    Args:
        counts: ``(E,)`` this rank's assignments per expert.
        counter: issues the all-to-all on the expert-parallel group.

    Returns:
        ``(p, E/p)``: entry ``[j, l]`` is the rows rank j sends to local expert l.
    """
    received = torch.empty_like(counts)  # (E,)
    counter.all_to_all_single(received, counts.contiguous())
    return received.view(counter.world_size, -1)  # (p, E/p)


class AllToAll(torch.autograd.Function):
    """``all_to_all_single`` of rows with uneven splits; backward is the reverse.

    Rank r's rows ``[sum(send[:j]), sum(send[:j+1]))`` go to rank j, and the rows
    received from rank j land in block j of the output. The gradient of what was
    received travels back the way it came: the same exchange with ``send`` and
    ``recv`` swapped (as GShard's dispatch and combine are each other's transpose).
    """

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        send: list[int],
        recv: list[int],
        counter: AllToAllCounter,
    ) -> Tensor:
        """Send ``x`` ``(sum(send), h)``; return the ``(sum(recv), h)`` received."""
        ctx.send, ctx.recv, ctx.counter = send, recv, counter
        out = x.new_empty((sum(recv), *x.shape[1:]))  # (S_in, h)
        counter.all_to_all_single(out, x.contiguous(), recv, send)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        """Send the received rows' gradient back to where the rows came from."""
        out = grad.new_empty((sum(ctx.send), *grad.shape[1:]))  # (S_out, h)
        ctx.counter.all_to_all_single(out, grad.contiguous(), ctx.send, ctx.recv)
        return out, None, None, None


def all_to_all(
    x: Tensor, send: list[int], recv: list[int], counter: AllToAllCounter
) -> Tensor:
    """Differentiable uneven all-to-all of the rows of ``x`` (see :class:`AllToAll`).

    Args:
        x: ``(sum(send), h)`` rows, block j for rank j.
        send: rows sent to each rank (``p`` entries).
        recv: rows received from each rank (``p`` entries).
        counter: issues the collective on the group and logs it.

    Returns:
        ``(sum(recv), h)``: block j from rank j.
    """
    return AllToAll.apply(x, send, recv, counter)
