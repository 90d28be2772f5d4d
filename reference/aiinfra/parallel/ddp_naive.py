"""Data parallelism, the naive way: all-reduce every gradient after backward.

Each of N ranks holds a full replica of the model and runs forward and backward on its
own 1/N of the batch. Because the loss is a mean over the batch, the gradient of the
whole batch is the mean of the N local gradients, so after backward every rank
all-reduces each gradient (a sum) and divides by N; all replicas then take the same
optimizer step and stay identical, provided they start identical, which a broadcast
from rank 0 ensures (Li et al. 2020, "PyTorch Distributed", Sec. 2-3). Notation: N
ranks in the data-parallel group, Psi trainable parameters.
"""

from __future__ import annotations

import zlib

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.parallel.comm_counter import CommCounter


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """Return the parameters that get gradients, in ``module.parameters()`` order.

    Raises:
        ValueError: ``module`` has no parameter with ``requires_grad=True``.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError("module has no trainable parameters (requires_grad=True)")
    return params


def check_replicas(module: nn.Module, group: dist.ProcessGroup | None) -> CommCounter:
    """Check that this rank belongs to ``group`` and every rank has the same model.

    The shape check is itself a collective (an all-gather of a small signature), so
    every rank raises the same error together instead of hanging in a later call.

    Args:
        module: the local replica.
        group: the data-parallel process group (``None``: the world).

    Returns:
        A :class:`CommCounter` on ``group``.

    Raises:
        ValueError: no trainable parameters, this rank is not in ``group``, or the
            replicas differ in their parameters' count, shapes or dtypes.
    """
    params = trainable_parameters(module)
    if group is not None and dist.get_rank(group) < 0:
        raise ValueError(f"group: rank {dist.get_rank()} is not a member of it")
    comm = CommCounter(group)
    shapes = str([(tuple(p.shape), p.dtype) for p in params])
    signature = torch.tensor([len(params), zlib.crc32(shapes.encode())])  # (2,)
    everyone = torch.empty(comm.world_size * 2, dtype=torch.int64)  # (N * 2,)
    comm.all_gather(everyone, signature)
    if not torch.equal(everyone.view(-1, 2), signature.expand(comm.world_size, 2)):
        raise ValueError(
            "module: the replicas in group differ in trainable parameter shapes or "
            f"dtypes (this rank has {len(params)} of them: {shapes[:200]})"
        )
    return comm


def broadcast_parameters(module: nn.Module, comm: CommCounter) -> None:
    """Copy group rank 0's parameters and buffers to every rank, in place."""
    with torch.no_grad():
        for t in [*module.parameters(), *module.buffers()]:
            comm.broadcast(t.data, group_src=0)


class NaiveDDP(nn.Module):
    """Data parallelism with one all-reduce per gradient, after backward.

    Usage: ``loss = ddp(x).mean(); loss.backward(); ddp.sync_gradients();
    optimizer.step()``.

    Args:
        module: the model replica; its parameters are overwritten by rank 0's.
        group: the data-parallel process group (``None``: the world).

    Raises:
        ValueError: see :func:`check_replicas`.
    """

    def __init__(self, module: nn.Module, group: dist.ProcessGroup | None = None):
        super().__init__()
        self.module = module
        self.comm = check_replicas(module, group)
        broadcast_parameters(module, self.comm)
        self.comm.reset()  # count only what training steps send

    def forward(self, *args, **kwargs):
        """Run the local replica on this rank's share of the batch."""
        return self.module(*args, **kwargs)

    def sync_gradients(self) -> None:
        """Replace every local gradient by the mean over the group's ranks."""
        n_ranks = self.comm.world_size
        for p in trainable_parameters(self.module):
            if p.grad is None:  # unused in this step: its gradient is zero everywhere
                p.grad = torch.zeros_like(p)
            self.comm.all_reduce(p.grad)  # sum over ranks, in place
            p.grad.div_(n_ranks)
