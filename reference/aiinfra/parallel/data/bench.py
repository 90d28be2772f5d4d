"""Step time of data parallelism: ours (naive, bucketed) against PyTorch DDP.

Every rank trains the same MLP with SGD on its share of the batch, and each variant's
step (forward, backward, gradient averaging, update) is timed between two barriers,
so a step lasts until the slowest rank is done. Variants run interleaved, several
repeats each, and the median is reported, because the machine may be shared. A
*compute only* variant skips communication altogether: the floor that overlapping
communication with backward tries to reach. The bucket-size sweep shows the trade-off
that Li et al. (2020) measure: small buckets start communicating early but pay the
per-message latency many times, one huge bucket starts only after backward.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from aiinfra import results
from aiinfra.distributed import run_distributed
from aiinfra.parallel.data.bucketed import BucketedDDP
from aiinfra.parallel.data.naive import NaiveDDP
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); timing does not
    from matplotlib.figure import Figure

MIB = 2**20
BAR = 1.25  # the book's bar: ours (bucketed) / DistributedDataParallel step time


@dataclass(frozen=True)
class DDPBenchConfig:
    """What to time.

    Args:
        world_size: gloo ranks N.
        widths: layer widths of the MLP (the default has 6.3 M parameters, 25 MB of
            fp32 gradients: large enough that the all-reduce costs as much as compute).
        batch: global batch B, divisible by ``world_size``.
        steps: timed steps per repeat (after one untimed warm-up step).
        repeats: repeats per variant, interleaved; the median is reported.
        bucket_mib: bucket sizes of the sweep, MiB; the largest is also the default
            of the comparison (DDP's own default is 25 MiB).
        backend: ``gloo`` (CPU processes) or ``nccl`` (one GPU per rank).
    """

    world_size: int = 2
    widths: tuple[int, ...] = (512, 2048, 2048, 512)
    batch: int = 64
    steps: int = 3
    repeats: int = 11
    bucket_mib: tuple[float, ...] = (0.25, 1.0, 4.0, 25.0)
    backend: str = "gloo"

    def __post_init__(self) -> None:
        if self.backend not in ("gloo", "nccl"):
            raise ValueError(f"backend must be gloo or nccl, got {self.backend!r}")
        for name in ("world_size", "batch", "steps", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch % self.world_size:
            raise ValueError(
                f"batch must be divisible by world_size ({self.world_size}), got "
                f"{self.batch}"
            )
        if not self.bucket_mib or min(self.bucket_mib) <= 0:
            raise ValueError(f"bucket_mib must be sizes > 0, got {self.bucket_mib}")


def _variant(impl: str, bucket_mib: float, cfg: DDPBenchConfig) -> Callable[[], None]:
    """A fresh model wrapped as ``impl``, and a function that runs one step on it."""
    device = _device(cfg.backend)
    model = mlp(cfg.widths).to(device)
    bucket_bytes = int(bucket_mib * MIB)
    if impl == "ours naive":
        wrapped = NaiveDDP(model)
    elif impl == "ours bucketed":
        wrapped = BucketedDDP(model, bucket_bytes=bucket_bytes)
    elif impl == "torch DDP":
        ids = None if device.type == "cpu" else [device.index]
        wrapped = nn.parallel.DistributedDataParallel(
            model, device_ids=ids, bucket_cap_mb=bucket_mib
        )
    else:  # "compute only": the same work without any communication
        wrapped = model
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    rank, n_ranks = dist.get_rank(), dist.get_world_size()
    ((x, y),) = regression_batches(1, cfg.batch, cfg.widths[0], cfg.widths[-1])
    x, y = (rank_share(t, rank, n_ranks).to(device) for t in (x, y))

    def step() -> None:
        optimizer.zero_grad()
        nn.functional.mse_loss(wrapped(x), y).backward()
        if impl == "ours naive":
            wrapped.sync_gradients()
        optimizer.step()

    return step


def _device(backend: str) -> torch.device:
    if backend == "nccl":
        return torch.device("cuda", dist.get_rank() % torch.cuda.device_count())
    return torch.device("cpu")


def bench_rank(cfg: DDPBenchConfig) -> list[dict[str, Any]]:
    """Run on every rank: seconds per step of each variant, one value per repeat."""
    device = _device(cfg.backend)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    top = max(cfg.bucket_mib)
    variants = [("compute only", top), ("ours naive", top)]
    for b in sorted(cfg.bucket_mib, reverse=True):  # the pair to compare first
        variants += [("ours bucketed", b), ("torch DDP", b)]
    steps = {v: _variant(*v, cfg) for v in variants}
    times: dict[tuple, list[float]] = {v: [] for v in variants}
    for _ in range(cfg.repeats):
        for v, step in steps.items():  # interleaved: a noisy minute hits all alike
            step()  # warm-up (first-call allocations)
            sync()
            dist.barrier()
            start = time.perf_counter()
            for _ in range(cfg.steps):
                step()
            sync()
            dist.barrier()
            times[v].append((time.perf_counter() - start) / cfg.steps)
    return [
        {
            "impl": impl,
            "bucket_mib": b,
            "step_s": statistics.median(times[(impl, b)]),
            "repeats_s": times[(impl, b)],
        }
        for impl, b in variants
    ]


def run_bench(cfg: DDPBenchConfig) -> dict[str, Any]:
    """Time every variant on ``cfg.world_size`` spawned ranks (rank 0's clock).

    Returns:
        ``{"config", "rows"}``, the body of a ``ddp`` results file.
    """
    n_params = sum(p.numel() for p in mlp(cfg.widths).parameters())
    rows = run_distributed(
        bench_rank, cfg.world_size, cfg, backend=cfg.backend, timeout=600
    )[0]
    return {"config": {**asdict(cfg), "n_params": n_params}, "rows": rows}


def _step_ms(res: dict, impl: str, bucket_mib: float | None = None) -> float:
    top = max(res["config"]["bucket_mib"])
    b = top if bucket_mib is None else bucket_mib
    rows = [r for r in res["rows"] if r["impl"] == impl and r["bucket_mib"] == b]
    if len(rows) != 1:
        measured = sorted({(r["impl"], r["bucket_mib"]) for r in res["rows"]})
        raise ValueError(
            f"impl and bucket_mib must be a measured pair {measured}, got "
            f"({impl!r}, {b})"
        )
    return 1e3 * rows[0]["step_s"]


def step_time_ms(
    impl: str, bucket_mib: float | None = None, backend: str = "gloo"
) -> float:
    """Median step time of ``impl`` in the results, ms (largest bucket if None)."""
    return _step_ms(results.load("ddp", backend), impl, bucket_mib)


def best_bucket_mib(impl: str = "ours bucketed", backend: str = "gloo") -> float:
    """The bucket size, MiB, at which ``impl`` had its shortest median step."""
    rows = [r for r in results.load("ddp", backend)["rows"] if r["impl"] == impl]
    return min(rows, key=lambda r: r["step_s"])["bucket_mib"]


def n_params(backend: str = "gloo") -> int:
    """Parameters of the benchmarked MLP."""
    return results.load("ddp", backend)["config"]["n_params"]


def bucketed_over_ddp(backend: str = "gloo") -> float:
    """Median over repeats of ours (bucketed) / DDP's step time, largest bucket.

    Each repeat timed the two variants one after the other, so the ratio of a pair
    cancels most of the drift of a shared machine's load.
    """
    res = results.load("ddp", backend)
    top = max(res["config"]["bucket_mib"])
    ours, ddp = (
        next(
            r["repeats_s"]
            for r in res["rows"]
            if r["impl"] == impl and r["bucket_mib"] == top
        )
        for impl in ("ours bucketed", "torch DDP")
    )
    return statistics.median(a / b for a, b in zip(ours, ddp, strict=True))


def results_table(backend: str = "gloo") -> Table:
    """Median step time per variant and bucket size, with the results' stamp."""
    res = results.load("ddp", backend)
    ddp = _step_ms(res, "torch DDP")
    rows = [
        [
            r["impl"],
            r["bucket_mib"],
            round(1e3 * r["step_s"], 1),
            round(1e3 * r["step_s"] / ddp, 2),
        ]
        for r in res["rows"]
    ]
    st, cfg = res["stamp"], res["config"]
    note = "Median step time over the repeats, the variants timed in turn."
    on, fields = results.run_on(st)
    stamp = (
        "{repeats} repeats x {steps} steps; {params} parameters, batch {batch}; "
        "{backend}, {ranks} ranks on " + on
    )
    fields |= {
        "repeats": cfg["repeats"],
        "steps": cfg["steps"],
        "params": f"{cfg['n_params']:,}",
        "batch": cfg["batch"],
        "backend": st["backend"],
        "ranks": st["world_size"],
    }
    columns = ["variant", "bucket (MiB)", "step (ms)", "/ DDP at 25 MiB"]
    return Table(columns, rows, note, stamp, fields=fields)


def ddp_step_time_figure(backend: str = "gloo") -> Figure:
    """Left: step time per variant; right: step time against bucket size."""
    from matplotlib.figure import Figure

    res = results.load("ddp", backend)
    fig = Figure(figsize=(9, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    impls = ["compute only", "ours naive", "ours bucketed", "torch DDP"]
    left.barh(impls[::-1], [_step_ms(res, i) for i in impls[::-1]], color="C0")
    left.set_xlabel("step time (ms)")
    for impl, marker in (("ours bucketed", "o"), ("torch DDP", "s")):
        pts = sorted(
            (r["bucket_mib"], 1e3 * r["step_s"])
            for r in res["rows"]
            if r["impl"] == impl
        )
        right.plot(*zip(*pts, strict=True), marker=marker, label=impl)
    right.axhline(
        _step_ms(res, "compute only"), color="gray", ls=":", label="compute only"
    )
    right.set_xscale("log")
    sizes = sorted(res["config"]["bucket_mib"])
    right.set_xticks(sizes, [f"{b:g}" for b in sizes])
    right.minorticks_off()
    right.set_ylim(bottom=0)
    right.set_xlabel("bucket size (MiB)")
    right.set_ylabel("step time (ms)")
    right.legend(frameon=False)
    st = res["stamp"]
    machine = results.machine_label(st)
    fig.suptitle(f"{st['world_size']} {st['backend']} ranks, {machine}", fontsize=9)
    return fig
