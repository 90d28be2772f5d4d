"""Bucketed data parallelism: all-reduce gradients during backward, in buckets.

The naive version waits for the whole backward pass and then sends one message per
parameter: the network idles while the processor computes, then the processor idles
while the network sends, and many small messages each pay the start-up latency. DDP
(Li et al. 2020, "PyTorch Distributed", Sec. 3.2) fixes both. A hook on each parameter
fires as soon as its gradient is accumulated; gradients are copied into a few flat
*buckets* of about ``bucket_bytes``, filled in reverse parameter order (the order
backward produces them), and a full bucket is all-reduced asynchronously while
backward carries on with the layers below. At the end of backward every handle is
waited on and the averaged gradients are copied back. Inside :meth:`BucketedDDP.
no_sync` the hooks send nothing, so gradients accumulate locally over micro-batches
and only the last backward communicates (gradient accumulation).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.parallel.data.naive import (
    broadcast_parameters,
    check_replicas,
    trainable_parameters,
)


@dataclass
class Bucket:
    """The gradients of a few parameters, all-reduced as one flat message.

    Args:
        params: the parameters, in the order their gradients are expected.
        buffer: (numel,) flat gradients, ``sum(p.numel() for p in params)``.
        offsets: where each parameter's gradient starts in ``buffer``.
        pending: parameters whose gradient has not arrived in this backward.
        handle: the in-flight all-reduce, once launched.
    """

    params: list[nn.Parameter]
    buffer: torch.Tensor
    offsets: list[int]
    pending: int
    handle: dist.Work | None = None


def assign_buckets(
    params: list[nn.Parameter], bucket_bytes: int
) -> list[list[nn.Parameter]]:
    """Group parameters in reverse order into buckets of at most ``bucket_bytes``.

    Backward produces gradients roughly in the reverse of the order in which the
    model registers its parameters, so reversed order fills the first bucket first.
    A parameter larger than ``bucket_bytes`` gets a bucket of its own; a bucket
    holds one dtype.

    Raises:
        ValueError: ``bucket_bytes`` <= 0.
    """
    if not bucket_bytes > 0:
        raise ValueError(f"bucket_bytes must be > 0, got {bucket_bytes!r}")
    # region fill
    buckets: list[list[nn.Parameter]] = [[]]
    size = 0
    for p in reversed(params):
        nbytes = p.numel() * p.element_size()
        current = buckets[-1]
        if current and (size + nbytes > bucket_bytes or current[0].dtype != p.dtype):
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += nbytes
    # endregion
    return buckets


class BucketedDDP(nn.Module):
    """Data parallelism that overlaps bucketed all-reduces with backward.

    Usage: ``loss = ddp(x).mean(); loss.backward(); optimizer.step()``; the
    gradients are averaged over the group by the time ``backward`` returns. Every
    trainable parameter must get a gradient in every backward (DDP's default, without
    ``find_unused_parameters``).

    Args:
        module: the model replica; its parameters are overwritten by rank 0's.
        group: the data-parallel process group (``None``: the world).
        bucket_bytes: target size of one all-reduce message, bytes (DDP: 25 MiB).

    Raises:
        ValueError: ``bucket_bytes`` <= 0, or see :func:`check_replicas`.
    """

    def __init__(
        self,
        module: nn.Module,
        group: dist.ProcessGroup | None = None,
        bucket_bytes: int = 25 * 2**20,
    ) -> None:
        super().__init__()
        params = trainable_parameters(module)
        groups = assign_buckets(params, bucket_bytes)  # checks before any collective
        self.module = module
        self.comm = check_replicas(module, group)
        broadcast_parameters(module, self.comm)
        self.comm.reset()
        self.buckets: list[Bucket] = []
        self._slot: dict[nn.Parameter, tuple[Bucket, int]] = {}
        for ps in groups:
            offsets = [0]
            for p in ps[:-1]:
                offsets.append(offsets[-1] + p.numel())
            numel = offsets[-1] + ps[-1].numel()
            buffer = ps[0].new_zeros(numel)  # (numel,) on the parameters' device
            bucket = Bucket(ps, buffer, offsets, pending=len(ps))
            self.buckets.append(bucket)
            self._slot.update(
                {p: (bucket, o) for p, o in zip(ps, offsets, strict=True)}
            )
        self.require_sync = True
        self._next = 0  # the next bucket to launch
        self._callback_queued = False
        for p in params:
            p.register_post_accumulate_grad_hook(self._on_grad_ready)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the local replica on this rank's share of the batch."""
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Accumulate gradients locally: backward passes inside send nothing."""
        before, self.require_sync = self.require_sync, False
        try:
            yield
        finally:
            self.require_sync = before

    def _on_grad_ready(self, p: nn.Parameter) -> None:
        """Hook: ``p.grad`` is final for this backward; launch full buckets."""
        if not self.require_sync:
            return
        if not self._callback_queued:  # first gradient of this backward
            torch.autograd.Variable._execution_engine.queue_callback(self._finish)
            self._callback_queued = True
        bucket, offset = self._slot[p]
        bucket.buffer[offset : offset + p.numel()].copy_(p.grad.flatten())
        bucket.pending -= 1
        # Launch in bucket order, never out of it: every rank must issue the same
        # collectives in the same order, whatever order its gradients arrive in.
        while self._next < len(self.buckets) and self.buckets[self._next].pending == 0:
            ready = self.buckets[self._next]
            ready.handle = self.comm.all_reduce(ready.buffer, async_op=True)
            self._next += 1

    def _finish(self) -> None:
        """End of backward: wait for every bucket, average, copy gradients back."""
        launched, self._next, self._callback_queued = self._next, 0, False
        if launched != len(self.buckets):
            raise RuntimeError(
                f"only {launched} of {len(self.buckets)} buckets were all-reduced: "
                "some trainable parameter got no gradient in this backward"
            )
        n_ranks = self.comm.world_size
        for bucket in self.buckets:
            bucket.handle.wait()
            bucket.buffer.div_(n_ranks)  # sum -> mean
            for p, offset in zip(bucket.params, bucket.offsets, strict=True):
                p.grad.copy_(bucket.buffer[offset : offset + p.numel()].view_as(p))
            bucket.pending, bucket.handle = len(bucket.params), None
