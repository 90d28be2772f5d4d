"""An nccl-tests-style benchmark: our collectives against torch.distributed's own.

nccl-tests (NVIDIA) times a collective over a sweep of message sizes and prints the
time, the algorithm and bus bandwidths (algbw, busbw; see
:mod:`aiinfra.comm.results`) and #wrong, the elements that differ from the expected
result. This does the same for each algorithm of :mod:`aiinfra.comm` and for
torch.distributed's own implementation of that collective, on gloo (CPU) or NCCL (one
GPU per rank). Once per size, each algorithm's output is compared with torch's for the
same input (small integers, so every order of summation is exact). Then a barrier,
``warmup`` untimed calls and ``iters`` calls between two ``perf_counter`` reads (after a
device synchronize) give the time per call; the slowest rank's time is reported. The
size is the whole buffer: the all-reduce, broadcast and reduce vector, the
reduce-scatter input, the all-gather output, the all-to-all send buffer.
"""

from __future__ import annotations

import datetime
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra import comm
from aiinfra.comm.results import algbw, busbw
from aiinfra.distributed import run_distributed

PIPELINE_SEGMENTS = 2  # pieces per chunk of the pipelined ring (gloo uses >= 2)
# collective -> algorithm -> function. Ours mirror torch.distributed's signatures, so
# one call shape per collective serves both (see _bind).
ALGORITHMS: dict[str, dict[str, Callable[..., Any]]] = {
    "all_reduce": {
        "ring": comm.ring_all_reduce,
        "ring_pipelined": partial(comm.ring_all_reduce, segments=PIPELINE_SEGMENTS),
        "recursive_doubling": comm.recursive_doubling_all_reduce,
        "rabenseifner": comm.rabenseifner_all_reduce,
        "hierarchical": comm.hierarchical_all_reduce,
        "torch": dist.all_reduce,
    },
    "reduce_scatter": {
        "ring": comm.ring_reduce_scatter,
        "torch": dist.reduce_scatter_single,
    },
    "all_gather": {"ring": comm.ring_all_gather, "torch": dist.all_gather_single},
    "broadcast": {"binomial": comm.binomial_broadcast, "torch": dist.broadcast},
    "reduce": {"binomial": comm.binomial_reduce, "torch": dist.reduce},
    "all_to_all": {
        "pairwise": comm.pairwise_all_to_all,
        "torch": dist.all_to_all_single,
    },
}
IN_PLACE = ("all_reduce", "broadcast", "reduce")  # the result overwrites the input
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")


@dataclass(frozen=True)
class BenchConfig:
    """What to measure.

    Args:
        collectives: keys of :data:`ALGORITHMS`.
        algorithms: algorithm names to keep, e.g. ``("ring", "torch")``; empty: all.
        min_bytes: smallest size in bytes; sizes double up to ``max_bytes``.
        max_bytes: largest size in bytes, >= ``min_bytes``.
        dtype: element type, one of :data:`DTYPES`.
        warmup: untimed calls per size (connections, caches, allocator).
        iters: timed calls per size, >= 1.
        local_size: ranks per simulated node for the hierarchical all-reduce; 0
            means half the world if its size is even, else all of it.
        repeats: timings per algorithm and size, >= 1, taken in turn (every
            algorithm of a size once, then again): a row's time is the median, and
            ``runs_us`` keeps each, so two algorithms compare run by run (paired).
    """

    collectives: tuple[str, ...] = tuple(ALGORITHMS)
    algorithms: tuple[str, ...] = ()
    min_bytes: int = 1024
    max_bytes: int = 16 * 2**20
    dtype: str = "float32"
    warmup: int = 5
    iters: int = 20
    local_size: int = 0
    repeats: int = 1

    def __post_init__(self) -> None:
        if not self.collectives or set(self.collectives) - set(ALGORITHMS):
            raise ValueError(
                f"collectives must be some of {list(ALGORITHMS)}, "
                f"got {list(self.collectives)}"
            )
        known = {a for c in self.collectives for a in ALGORITHMS[c]}
        if set(self.algorithms) - known:
            raise ValueError(
                f"algorithms must be some of {sorted(known)} for "
                f"{list(self.collectives)}, got {list(self.algorithms)}"
            )
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        lows = {"min_bytes": 1, "warmup": 0, "iters": 1, "local_size": 0, "repeats": 1}
        for name, low in (lows | {"max_bytes": self.min_bytes}).items():
            if getattr(self, name) < low:
                raise ValueError(f"{name} must be >= {low}, got {getattr(self, name)}")

    def sizes(self) -> list[int]:
        """min_bytes, 2 min_bytes, 4 min_bytes, ... up to max_bytes."""
        steps = (self.max_bytes // self.min_bytes).bit_length()
        return [self.min_bytes << k for k in range(steps)]

    def local_size_for(self, world_size: int) -> int:
        """``local_size``, or its default for ``world_size`` ranks."""
        if self.local_size:
            return self.local_size
        return world_size // 2 if world_size % 2 == 0 else world_size


def _buffers(
    collective: str, count: int, dtype: torch.dtype, device: torch.device
) -> tuple[Tensor, Tensor]:
    """The input and output buffers of ``collective`` for a size of ``count`` elements.

    The input holds small integers, so every order of summation is exact.
    """
    r, p = dist.get_rank(), dist.get_world_size()
    n_in = count // p if collective == "all_gather" else count
    n_out = count // p if collective == "reduce_scatter" else count
    inp = ((torch.arange(n_in, device=device) + 3 * r) % 7 - 3).to(dtype)  # (n_in,)
    return inp, torch.zeros(n_out, dtype=dtype, device=device)  # (n_out,)


def _bind(
    collective: str, algorithm: str, inp: Tensor, out: Tensor, ctx: dict
) -> Callable[[], Any]:
    """``algorithm`` as a call without arguments, in its collective's call shape."""
    fn = ALGORITHMS[collective][algorithm]
    kw = {} if algorithm == "torch" else {"check_consistency": False}
    if algorithm == "hierarchical":
        return partial(fn, out, ctx["hierarchy"], **kw)
    if collective in IN_PLACE:
        root = (0,) if collective != "all_reduce" else ()
        return partial(fn, out, *root, **kw)
    return partial(fn, out, inp, **kw)


def _seconds(
    call: Callable[[], Any], config: BenchConfig, device: torch.device
) -> float:
    """Seconds per call: the slowest rank's mean over ``config.iters`` calls."""
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    for _ in range(config.warmup):
        call()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(config.iters):
        call()
    sync()
    t = torch.tensor([(time.perf_counter() - t0) / config.iters], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def _measure(
    collective: str, algs: list[str], count: int, config: BenchConfig, ctx: dict
) -> list[dict[str, Any]]:
    """One row per algorithm at one size: each checked against torch, then timed.

    The algorithms take turns ``config.repeats`` times, so a slow moment of the
    machine falls on all of them rather than on one.
    """
    device, dtype = ctx["device"], getattr(torch, config.dtype)
    inp, out = _buffers(collective, count, dtype, device)
    start = inp if collective in IN_PLACE else out  # the output buffer's first value
    ref = start.clone()
    _bind(collective, "torch", inp, ref, ctx)()  # the expected result
    defined = collective != "reduce" or dist.get_rank() == 0  # reduce fills the root
    wrong = {}
    for alg in algs:
        got = start.clone()
        _bind(collective, alg, inp, got, ctx)()
        wrong[alg] = (got != ref).sum() * defined  # () int64
        dist.all_reduce(wrong[alg])  # #wrong over all ranks
    runs: dict[str, list[float]] = {alg: [] for alg in algs}
    for _ in range(config.repeats):
        for alg in algs:
            out.zero_()  # zeros keep repeated in-place sums finite while timed
            runs[alg].append(
                _seconds(_bind(collective, alg, inp, out, ctx), config, device)
            )
    size, p = count * dtype.itemsize, dist.get_world_size()
    rows = []
    for alg in algs:
        seconds = statistics.median(runs[alg])
        row = {
            "collective": collective,
            "algorithm": alg,
            "size": size,
            "count": count,
            "dtype": config.dtype,
            "time_us": round(seconds * 1e6, 3),
            "algbw": round(algbw(size, seconds), 4),
            "busbw": round(busbw(collective, size, seconds, p), 4),
            "wrong": int(wrong[alg].item()),
        }
        if config.repeats > 1:
            row["runs_us"] = [round(t * 1e6, 3) for t in runs[alg]]
        rows.append(row)
    return rows


def bench_rank(config: BenchConfig) -> list[dict[str, Any]]:
    """Run the sweep on this rank, inside an initialized process group.

    Returns:
        One row per (collective, algorithm, size), the same on every rank.
    """
    p, nccl = dist.get_world_size(), dist.get_backend() == "nccl"
    ctx = {
        "device": torch.device(f"cuda:{torch.cuda.current_device()}" if nccl else "cpu")
    }
    wanted = config.algorithms or ("hierarchical",)
    if "all_reduce" in config.collectives and "hierarchical" in wanted:
        ctx["hierarchy"] = comm.Hierarchy.create(config.local_size_for(p))
    rows = []
    for collective in config.collectives:
        algs = [a for a in ALGORITHMS[collective] if a in (config.algorithms or [a])]
        for size in config.sizes():
            count = size // getattr(torch, config.dtype).itemsize
            if collective in ("reduce_scatter", "all_gather", "all_to_all"):
                count -= count % p  # p equal blocks, as nccl-tests rounds
            if count:
                rows += _measure(collective, algs, count, config, ctx)
    return rows


def torchrun_world_size() -> int | None:
    """The job's size if torchrun started this process (it sets RANK, WORLD_SIZE)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["WORLD_SIZE"])
    return None


def check_launch(config: BenchConfig, world_size: int, backend: str) -> None:
    """Check what a run on ``world_size`` ranks over ``backend`` needs.

    Raises:
        ValueError: ``world_size`` < 1, an unknown ``backend``, ``nccl`` without a
            GPU for each local rank, or a ``local_size`` that does not divide
            ``world_size``.
    """
    if (
        isinstance(world_size, bool)
        or not isinstance(world_size, int)
        or world_size < 1
    ):
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', got {backend!r}")
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))  # ranks on this node
    if backend == "nccl" and torch.cuda.device_count() < local:
        raise ValueError(
            f"backend 'nccl' needs one CUDA GPU per rank: {local} ranks on this "
            f"machine, {torch.cuda.device_count()} GPUs"
        )
    if world_size % config.local_size_for(world_size):
        raise ValueError(
            f"local_size {config.local_size} must divide world_size {world_size}"
        )


def run_bench(
    config: BenchConfig, world_size: int, backend: str = "gloo", timeout: float = 1800.0
) -> list[dict[str, Any]]:
    """Run :func:`bench_rank` on ``world_size`` spawned ranks and return its rows.

    Under torchrun, join the job instead: ``world_size`` is then the job's, each
    process runs one rank, and every rank returns the rows.

    Raises:
        ValueError: as :func:`check_launch`, before any process starts.
    """
    world_size = torchrun_world_size() or world_size
    check_launch(config, world_size, backend)
    if torchrun_world_size() is None:
        return run_distributed(
            bench_rank, world_size, config, backend=backend, timeout=timeout
        )[0]
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
    try:
        return bench_rank(config)
    finally:
        dist.destroy_process_group()
