"""Data, pipeline and tensor parallelism at once: one rank's part of a 3-D layout.

A rank of a ``dp x pp x tp`` device mesh (:func:`~aiinfra.plan.device_mesh.
build_device_mesh`) holds one pipeline stage (its ``pp`` coordinate), of that stage
only its tensor-parallel shard (``tp``), and trains on its share of the batch
(``dp``). The three pieces are the chapter's own, composed, not rewritten: every
block is a Megatron-split :class:`~aiinfra.parallel.tensor.model.
TensorParallelBlock` over the ``tp`` group, the blocks are cut into stages run by a
:class:`~aiinfra.parallel.pipeline.executor.PipelineExecutor` over the ``pp`` group, and
the gradients are averaged over the ``dp`` group before the optimizer step. The
embedding, final norm and head are kept whole on their stage's ``tp`` ranks
(Megatron splits them by vocabulary too; :mod:`aiinfra.parallel.tensor.vocab`
shows how), so each ``tp`` rank of the first and last stage computes them alike.
The ranks talking to each other differ per dimension: a ``tp`` all-reduce joins
consecutive ranks (inside a node), a pipeline send goes to the rank ``tp`` further
on, and the ``dp`` all-reduce spans the mesh's outermost dimension.
"""

from __future__ import annotations

import copy

import torch.distributed as dist
from torch import Tensor, nn
from torch.distributed.device_mesh import DeviceMesh

from aiinfra.models.transformer import Transformer
from aiinfra.parallel.pipeline.executor import PipelineExecutor
from aiinfra.parallel.pipeline.schedules import Schedule
from aiinfra.parallel.tensor.model import TensorParallelBlock

DIMS = ("dp", "pp", "tp")


def split_blocks(model: Transformer, group: dist.ProcessGroup | None) -> Transformer:
    """A copy of ``model`` whose blocks are split over ``group`` (Megatron's plan).

    Args:
        model: the full model; left unchanged.
        group: the tensor-parallel group.

    Returns:
        The copy: embedding, norm and head whole, each block a
        :class:`~aiinfra.parallel.tensor.model.TensorParallelBlock`.

    Raises:
        TypeError: ``model`` is not a :class:`~aiinfra.models.transformer.Transformer`.
        ValueError: a block is not a Llama-style one, or the group size does not
            divide the heads, KV heads or ``d_ff``.
    """
    if not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer, got {type(model).__name__}")
    out = copy.deepcopy(model)  # the blocks' norms are reused: the copy's own
    out.blocks = nn.ModuleList(
        TensorParallelBlock(block, group, sp=False) for block in out.blocks
    )
    return out


class ThreeDParallel:
    """One rank's stage, tensor shard and batch share of a ``dp x pp x tp`` layout.

    Args:
        model: the full model, identical on every rank (only this rank's stage and
            shard are kept).
        mesh: a mesh with dimensions ``dp``, ``pp`` and ``tp`` (others of size 1).
        schedule: the pipeline schedule; ``schedule.p`` must be the ``pp`` size.

    Raises:
        TypeError: ``model`` or ``mesh`` has the wrong type.
        ValueError: ``mesh`` lacks one of the dimensions or has another of size
            > 1, ``schedule.p`` is not the ``pp`` size, or the model does not split
            (see :func:`split_blocks` and
            :class:`~aiinfra.parallel.pipeline.executor.PipelineExecutor`). All checked
            before any communication.
    """

    def __init__(
        self, model: Transformer, mesh: DeviceMesh, schedule: Schedule
    ) -> None:
        if not isinstance(mesh, DeviceMesh):
            raise TypeError(f"mesh must be a DeviceMesh, got {type(mesh).__name__}")
        names = mesh.mesh_dim_names or ()
        sizes = dict(zip(names, mesh.mesh.shape, strict=True))
        if missing := [d for d in DIMS if d not in sizes]:
            raise ValueError(f"mesh must have dimensions {DIMS}; missing {missing}")
        if extra := [d for d, n in sizes.items() if d not in DIMS and n > 1]:
            raise ValueError(f"mesh dimensions {extra} must have size 1 here")
        if schedule.p != sizes["pp"]:
            raise ValueError(
                f"schedule.p = {schedule.p} must equal the mesh's pp size {sizes['pp']}"
            )
        self.dp = mesh.get_group("dp")
        self.n_dp = sizes["dp"]
        self.model = split_blocks(model, mesh.get_group("tp"))
        self.pipeline = PipelineExecutor(self.model, schedule, mesh.get_group("pp"))

    def parameters(self) -> list[nn.Parameter]:
        """The parameters this rank holds: its stage's, tensor-parallel shards."""
        return [p for s in self.pipeline.stages.values() for p in s.parameters()]

    def step(self, tokens: Tensor, targets: Tensor) -> Tensor | None:
        """Forward and backward of this rank's share; gradients averaged over dp.

        Args:
            tokens: ``(B, T)`` token ids of the global batch, the same on every
                rank; data-parallel rank ``d`` takes rows ``d B/N_d .. (d+1)
                B/N_d - 1`` and splits them into ``schedule.m`` micro-batches.
            targets: ``(B, T)`` next-token ids.

        Returns:
            On the last stage, the loss of the whole batch (mean over ``dp``);
            ``None`` elsewhere.

        Raises:
            ValueError: ``B`` is not a multiple of ``N_d m``, or the shapes differ.
        """
        m = self.pipeline.schedule.m
        if tokens.dim() != 2 or tokens.shape != targets.shape:
            raise ValueError(
                f"tokens and targets must both be (B, T), got {tuple(tokens.shape)} "
                f"and {tuple(targets.shape)}"
            )
        if len(tokens) % (self.n_dp * m):
            raise ValueError(
                f"the batch B = {len(tokens)} must be a multiple of N_d * m = "
                f"{self.n_dp} * {m}"
            )
        rows = len(tokens) // self.n_dp
        mine = slice(dist.get_rank(self.dp) * rows, (dist.get_rank(self.dp) + 1) * rows)
        # region step
        loss = self.pipeline.step(tokens[mine], targets[mine])
        for param in self.parameters():  # the mean over the data-parallel group
            dist.all_reduce(param.grad, group=self.dp)
            param.grad /= self.n_dp
        if loss is not None:
            loss = loss.detach().clone()
            dist.all_reduce(loss, group=self.dp)
            loss /= self.n_dp
        # endregion
        return loss
