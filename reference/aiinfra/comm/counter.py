"""Collectives that count what they send: the data-parallel communication volume.

The ZeRO paper (Rajbhandari et al. 2020, Sec. 7) prices a data-parallel step in
*elements per rank*: an all-reduce of Psi gradients is a reduce-scatter followed by an
all-gather, and "each step moves Psi elements", so DDP and ZeRO stages 1-2 move 2 Psi
and stage 3, which all-gathers the parameters twice, moves 3 Psi. That is the large-N
limit of what a ring really sends: each of the N ranks sends (N-1)/N of the buffer per
reduce-scatter or all-gather, so 2 (N-1)/N Psi per all-reduce (Thakur et al. 2005).
:class:`CommCounter` issues ``torch.distributed``'s own collectives on one process
group and logs each call, so a test can check both counts exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

# Elements per rank of one collective on a buffer of n elements, in the paper's
# convention: a reduce-scatter or an all-gather moves the whole buffer once, an
# all-reduce (reduce-scatter + all-gather) twice, a broadcast once.
PAPER_FACTOR = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1, "broadcast": 1}


@dataclass
class CommCounter:
    """``torch.distributed`` collectives on ``group`` that log the size of each call.

    Args:
        group: the process group; ``None`` is the default (world) group.
        log: one ``(op, numel, element_size)`` per call, ``numel`` being the size of
            the full buffer (the reduce-scatter input, the all-gather output).
    """

    group: dist.ProcessGroup | None = None
    log: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        """Ranks in the group (N)."""
        return dist.get_world_size(self.group)

    @property
    def rank(self) -> int:
        """This process's rank within the group."""
        return dist.get_rank(self.group)

    def all_reduce(
        self,
        tensor: torch.Tensor,
        async_op: bool = False,
        op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM,
    ) -> dist.Work | None:
        """Reduce ``tensor`` over the group in place; a work handle if async.

        A sum unless ``op`` says otherwise (``ReduceOp.MAX`` for a maximum).
        """
        self.log.append(("all_reduce", tensor.numel(), tensor.element_size()))
        return dist.all_reduce(tensor, op=op, group=self.group, async_op=async_op)

    def reduce_scatter(
        self, output: torch.Tensor, input: torch.Tensor, async_op: bool = False
    ) -> dist.Work | None:
        """Sum ``input`` (N n,) over the group; rank r receives chunk r in ``output``.

        gloo implements ``reduce_scatter_single`` (``reduce_scatter_tensor`` before
        torch 2.13) natively, so no all-reduce stands in for it.
        """
        self.log.append(("reduce_scatter", input.numel(), input.element_size()))
        return dist.reduce_scatter_single(
            output, input, group=self.group, async_op=async_op
        )

    def all_gather(
        self, output: torch.Tensor, input: torch.Tensor, async_op: bool = False
    ) -> dist.Work | None:
        """Concatenate every rank's ``input`` (n,) into ``output`` (N n,)."""
        self.log.append(("all_gather", output.numel(), output.element_size()))
        return dist.all_gather_single(
            output, input, group=self.group, async_op=async_op
        )

    def broadcast(self, tensor: torch.Tensor, group_src: int = 0) -> None:
        """Overwrite ``tensor`` with rank ``group_src``'s copy (group rank)."""
        self.log.append(("broadcast", tensor.numel(), tensor.element_size()))
        dist.broadcast(tensor, group_src=group_src, group=self.group)

    def reset(self) -> None:
        """Forget the calls logged so far (e.g. the set-up broadcasts)."""
        self.log.clear()

    def paper_elements(self) -> int:
        """Elements per rank in the ZeRO paper's convention (2 Psi for DDP)."""
        return sum(PAPER_FACTOR[op] * n for op, n, _ in self.log)

    def ring_elements(self) -> float:
        """Elements each rank sends with ring algorithms: (N-1)/N of the paper's.

        A broadcast is counted as a pipelined ring too (each rank but the last
        forwards the buffer once); only the reductions matter in a training step.
        """
        n_ranks = self.world_size
        return (n_ranks - 1) / n_ranks * self.paper_elements()

    def paper_bytes(self) -> int:
        """Bytes per rank in the paper's convention (elements x element size)."""
        return sum(PAPER_FACTOR[op] * n * size for op, n, size in self.log)
