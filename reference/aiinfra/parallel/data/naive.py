"""Data parallelism, the naive way: all-reduce every gradient after backward.

Each of N ranks holds a full replica of the model and runs forward and backward on its
own 1/N of the batch. Because the loss is a mean over the batch, the gradient of the
whole batch is the mean of the N local gradients, so after backward every rank
all-reduces each gradient (a sum) and divides by N; all replicas then take the same
optimizer step and stay identical, provided they start identical, which a broadcast
from rank 0 ensures (Li et al. 2020, "PyTorch Distributed", Sec. 2-3). Notation: N
ranks in the data-parallel group, Psi trainable parameters. Nothing here is tied to a
device: buffers live where the parameters do, so the same code runs over gloo on CPUs
and over NCCL on GPUs.
"""

from __future__ import annotations

import zlib
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.comm.counter import CommCounter
from aiinfra.distributed import backend_devices


def trainable_parameters(module: nn.Module) -> list[nn.Parameter]:
    """Return the parameters that get gradients, in ``module.parameters()`` order.

    Raises:
        ValueError: ``module`` has no parameter with ``requires_grad=True``.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if not params:
        raise ValueError("module has no trainable parameters (requires_grad=True)")
    return params


def parameter_device(
    params: list[nn.Parameter], group: dist.ProcessGroup | None
) -> torch.device:
    """Return the one device of ``params``, checked against ``group``'s backend.

    Every buffer a data-parallel wrapper allocates lives on this device, so the
    collectives see the tensors the backend expects: CUDA ones for NCCL, CPU ones
    for gloo. The check is local, so it runs before any collective.

    Raises:
        ValueError: the parameters are on several devices, or on a device type
            that ``group``'s backend does not communicate (CPU tensors with NCCL).
    """
    devices = sorted({str(p.device) for p in params})
    if len(devices) > 1:
        raise ValueError(
            f"module: its trainable parameters are on {devices}; "
            "data parallelism needs them on one device"
        )
    device = params[0].device
    backends = backend_devices(group)
    if device.type not in backends:
        raise ValueError(
            f"module: its parameters are on {device}, but group's backend "
            f"({dist.get_backend_config(group)}) communicates only "
            f"{sorted(backends)} tensors"
        )
    return device


def check_replicas(module: nn.Module, group: dist.ProcessGroup | None) -> CommCounter:
    """Check that this rank belongs to ``group`` and every rank has the same model.

    The shape check is itself a collective (an all-gather of a small signature, on
    the parameters' device, which the backend was just checked to support), so every
    rank raises the same error together instead of hanging in a later call.

    Args:
        module: the local replica.
        group: the data-parallel process group (``None``: the world).

    Returns:
        A :class:`CommCounter` on ``group``.

    Raises:
        ValueError: no trainable parameters, this rank is not in ``group``, the
            parameters' device does not suit the backend (see
            :func:`parameter_device`), or the replicas differ in their parameters'
            count, shapes or dtypes.
    """
    params = trainable_parameters(module)
    if group is not None and dist.get_rank(group) < 0:
        raise ValueError(f"group: rank {dist.get_rank()} is not a member of it")
    device = parameter_device(params, group)
    comm = CommCounter(group)
    shapes = str([(tuple(p.shape), p.dtype) for p in params])
    signature = torch.tensor(
        [len(params), zlib.crc32(shapes.encode())], device=device
    )  # (2,)
    everyone = signature.new_empty(comm.world_size * 2)  # (N * 2,)
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

    def __init__(
        self, module: nn.Module, group: dist.ProcessGroup | None = None
    ) -> None:
        super().__init__()
        self.module = module
        self.comm = check_replicas(module, group)
        broadcast_parameters(module, self.comm)
        self.comm.reset()  # count only what training steps send

    def forward(self, *args: Any, **kwargs: Any) -> Any:
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
