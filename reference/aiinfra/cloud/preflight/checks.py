"""What one rank runs in a pre-flight check: all-reduce, GEMM burn-in, replicas.

Each function runs inside a process group, on this rank's device (CPU under gloo,
its GPU under NCCL), and ends with an all-gather so that every rank holds every
rank's numbers and can judge them (:mod:`aiinfra.cloud.preflight.run`) without a
coordinator. A result is compared bit for bit through :func:`bit_checksum`, the
sum of its 32-bit words as integers: one flipped bit changes a word by a power of
two and so the sum, where ``allclose`` would pass a flipped low mantissa bit.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

from aiinfra.cloud.preflight.config import INJECTED_SLOWDOWN
from aiinfra.distributed import rank_device
from aiinfra.timing import cuda_wall_clock

SEED = 0  # every rank draws the same matrices and parameters
FLIPPED_BIT = 3  # a low mantissa bit: the value moves by about 1e-6 of itself


def _clock(device: torch.device) -> float:
    """Seconds of compute: wall time on a GPU, this thread's CPU time on the CPU.

    The GPU's clock is read once its queued work is done; the thread's CPU time is
    the one the other processes of a shared machine leave alone.
    """
    return cuda_wall_clock() if device.type == "cuda" else time.thread_time()


def _wall(device: torch.device) -> float:
    """Wall seconds once the device has finished its queued work.

    A collective runs in the backend's own threads: only the wall clock sees it.
    """
    return cuda_wall_clock() if device.type == "cuda" else time.perf_counter()


def bit_checksum(t: torch.Tensor) -> torch.Tensor:
    """Sum of ``t``'s 32-bit words read as integers, an int64 scalar on its device.

    Args:
        t: a tensor of a 4-byte dtype (fp32, int32), any shape.
    """
    if t.element_size() != 4:
        raise TypeError(f"t must have a 4-byte dtype, got {t.dtype}")
    return t.detach().contiguous().view(torch.int32).to(torch.int64).sum()


def flip_bit(t: torch.Tensor, bit: int = FLIPPED_BIT) -> None:
    """Flip bit ``bit`` of ``t``'s first 32-bit word, in place: a planted SDC."""
    t.view(-1).view(torch.int32)[0] ^= 1 << bit


def _gather(x: torch.Tensor) -> torch.Tensor:
    """Every rank's ``x`` stacked along a new first axis, on every rank."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x.contiguous())
    return torch.stack(parts)  # (ranks, *x.shape)


# region all-reduce
def all_reduce_smoke(numel: int, repeats: int) -> dict:
    """Sum known values; check the sum exactly; time ``repeats`` all-reduces.

    Rank ``r`` contributes ``r + 1`` in every element, so every element of the sum
    is ``W (W + 1) / 2`` exactly (an integer fp32 holds).

    Returns:
        ``exact``: per rank, whether its whole result was that sum;
        ``seconds``: per rank, its fastest all-reduce.
    """
    device, rank, world = rank_device(), dist.get_rank(), dist.get_world_size()
    x = torch.full((numel,), float(rank + 1), device=device)
    dist.all_reduce(x)  # the check, and the warm-up
    exact = torch.tensor(bool((x == world * (world + 1) / 2).all()), device=device)
    times = []
    for _ in range(repeats):
        x.fill_(rank + 1)
        dist.barrier()
        start = _wall(device)
        dist.all_reduce(x)
        times.append(_wall(device) - start)
    best = torch.tensor(min(times), dtype=torch.float64, device=device)
    return {"exact": _gather(exact).tolist(), "seconds": _gather(best).tolist()}


# endregion


# region burn-in
def gemm_burn_in(size: int, iters: int, sdc: bool = False, slow: bool = False) -> dict:
    """Multiply the same seeded matrices ``iters`` times; checksum every result.

    Args:
        size: side of the square fp32 matrices.
        iters: GEMMs.
        sdc: plant a fault: flip a bit of every result from iteration ``iters // 2``.
        slow: plant a fault: compute each GEMM :data:`INJECTED_SLOWDOWN` times, as a
            throttled GPU would take that much longer.

    Returns:
        ``checksums``: per rank, the :func:`bit_checksum` of each result;
        ``seconds``: per rank, the median seconds of one GEMM.
    """
    device = rank_device()
    gen = torch.Generator().manual_seed(SEED)
    a = torch.randn(size, size, generator=gen).to(device)  # (n, n)
    b = torch.randn(size, size, generator=gen).to(device)  # (n, n)
    sums, times = [], []
    for i in range(iters):
        start = _clock(device)
        for _ in range(INJECTED_SLOWDOWN if slow else 1):
            c = a @ b  # (n, n)
        times.append(_clock(device) - start)
        if sdc and i >= iters // 2:
            flip_bit(c)
        sums.append(bit_checksum(c))
    dist.barrier()
    spent = torch.tensor(statistics.median(times), dtype=torch.float64, device=device)
    return {
        "checksums": _gather(torch.stack(sums)).tolist(),
        "seconds": _gather(spent).tolist(),
    }


# endregion


# region replicas
def replica_checksums(params: list[torch.Tensor]) -> list[int]:
    """Every data-parallel replica's parameter checksum, on every rank.

    Replicas that all-reduced the same gradients and stepped the same optimizer
    must hold the same bits; a rank whose checksum differs computed its update
    wrongly, or its memory changed its weights.

    Args:
        params: this replica's parameters, fp32.
    """
    total = sum(bit_checksum(p) for p in params)
    return _gather(total).tolist()


def sgd_step_replicas(size: int, sdc: bool = False) -> list[int]:
    """One SGD step of a seeded ``size x size`` weight on every rank; its checksums.

    The gradient is all-reduced, so every replica applies the same update; ``sdc``
    flips a bit of this rank's updated weight, as a faulty update would.
    """
    device = rank_device()
    gen = torch.Generator().manual_seed(SEED)
    w = torch.randn(size, size, generator=gen).to(device)  # (n, n) the weight
    g = torch.randn(size, size, generator=gen).to(device)  # (n, n) its gradient
    dist.all_reduce(g)
    g /= dist.get_world_size()
    w -= 0.01 * g
    if sdc:
        flip_bit(w)
    return replica_checksums([w])


# endregion
