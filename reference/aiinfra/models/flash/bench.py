"""Time and memory of four attention implementations (``aiinfra bench attention``).

Compares standard attention (``N x N`` scores in memory), the tiled PyTorch
FlashAttention of :mod:`aiinfra.models.flash.attention`, the Triton kernel of
:mod:`aiinfra.models.flash.triton_forward` (GPU only; backward in
:mod:`aiinfra.models.flash.triton_backward`) and PyTorch's
``scaled_dot_product_attention`` over sequence lengths. Time is the median of
``--repeats`` runs after one warm-up; memory is the peak of what the call allocates
beyond its inputs (``torch.cuda.max_memory_allocated`` on a GPU,
:class:`~aiinfra.models.flash.memory.PeakMemory` on the CPU, measured in a
separate run because tracking slows the call down). Throughput counts the matmul
FLOPs ``4 B H N^2 d`` of the forward pass (half when causal) and 2.5 times that
for forward plus backward, the convention of the FlashAttention papers. The
defaults are small on the CPU and realistic on a GPU; on a GPU, ``nox -s gpu`` stores
the results (:mod:`aiinfra.results`, kind ``attention``) that the book renders.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra import progress
from aiinfra.models.flash.attention import flash_attention, standard_attention
from aiinfra.models.flash.memory import PeakMemory
from aiinfra.report import Table
from aiinfra.timing import note_spread

IMPLEMENTATIONS = ("standard", "tiled", "triton", "sdpa")
PASSES = ("forward", "forward+backward")
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


@dataclass(frozen=True)
class AttentionBenchConfig:
    """What to time; ``None`` fields take the device's default.

    Args:
        device: ``cpu``, ``cuda`` or ``auto`` (a GPU if there is one).
        impls: implementations (default: all that run on the device).
        seq_lens: sequence lengths T (128 256 512 on the CPU, 1K-16K on a GPU).
        batch: B.
        heads: H (2 on the CPU, 16 on a GPU).
        head_dim: d.
        dtype: a key of :data:`DTYPES` (float32 CPU, bfloat16 GPU).
        causal: the causal mask.
        passes: some of :data:`PASSES`.
        block: block size of the tiled PyTorch version.
        repeats: timed runs per point; the median is reported.

    Raises:
        ValueError: a size < 1, Triton without a GPU or with a head dimension that is
            not a power of two >= 16, CUDA asked for where there is none.
    """

    device: str = "auto"
    impls: tuple[str, ...] | None = None
    seq_lens: tuple[int, ...] | None = None
    batch: int = 1
    heads: int | None = None
    head_dim: int = 64
    dtype: str | None = None
    causal: bool = False
    passes: tuple[str, ...] = ("forward",)
    block: int = 64
    repeats: int = 3

    def __post_init__(self) -> None:
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be cpu, cuda or auto, got {self.device!r}")
        if device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device cuda: no CUDA device is available")
        gpu = device == "cuda"
        impls = self.impls or tuple(i for i in IMPLEMENTATIONS if gpu or i != "triton")
        seq_lens = self.seq_lens or (
            (1024, 2048, 4096, 8192, 16384) if gpu else (128, 256, 512)
        )
        fill = {
            "device": device,
            "impls": tuple(impls),
            "seq_lens": tuple(seq_lens),
            "heads": self.heads if self.heads is not None else (16 if gpu else 2),
            "dtype": self.dtype or ("bfloat16" if gpu else "float32"),
        }
        for name, value in fill.items():
            object.__setattr__(self, name, value)
        if set(self.impls) - set(IMPLEMENTATIONS):
            raise ValueError(f"impls must be some of {IMPLEMENTATIONS}, got {impls}")
        if not self.passes or set(self.passes) - set(PASSES):
            raise ValueError(f"passes must be some of {PASSES}, got {self.passes}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        if "triton" in self.impls and not gpu:
            raise ValueError(
                "impls: triton needs a CUDA device (the tests run it in the CPU "
                "interpreter)"
            )
        for name in ("batch", "heads", "head_dim", "block", "repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if min(self.seq_lens) < 1:
            raise ValueError(f"seq_lens must be >= 1, got {self.seq_lens}")
        d = self.head_dim
        if "triton" in self.impls and (d < 16 or d & (d - 1)):
            raise ValueError(
                f"head_dim must be a power of two >= 16 for triton, got {d}"
            )


def _attention_fn(impl: str, causal: bool, block: int) -> Callable[..., Tensor]:
    if impl == "standard":
        return lambda q, k, v: standard_attention(q, k, v, causal)
    if impl == "tiled":
        return lambda q, k, v: flash_attention(
            q, k, v, causal, block_q=block, block_k=block
        )
    if impl == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    from aiinfra.models.flash.triton_backward import flash_attention_triton

    return lambda q, k, v: flash_attention_triton(q, k, v, causal)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(
    fn: Callable[..., Tensor],
    shape: tuple[int, ...],
    dtype: torch.dtype,
    device: str,
    backward: bool,
    repeats: int,
) -> tuple[float, int]:
    """Median milliseconds of ``fn(q, k, v)`` (and its backward) and peak bytes."""
    q, k, v = (
        torch.randn(shape, dtype=dtype, device=device, requires_grad=backward)
        for _ in range(3)
    )

    def call() -> None:
        o = fn(q, k, v)
        if backward:
            o.backward(torch.ones_like(o))

    call()  # warm-up: kernel compilation, allocator caches
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        call()
        _sync(device)
        times.append(1e3 * (time.perf_counter() - start))
    note_spread(times)
    if device == "cuda":
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        call()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        with PeakMemory() as mem:
            call()
        peak = mem.peak
    return statistics.median(times), peak


def _sig(x: float) -> float:
    """Four significant digits, for readable JSON."""
    return float(f"{x:.4g}")


def run_bench(cfg: AttentionBenchConfig) -> dict[str, Any]:
    """Time every implementation, pass and length; the body of a results file.

    Returns:
        The ``config`` (the settings) and the ``rows``, one dictionary per
        implementation, pass and length with ``impl``, ``pass``, ``N``, ``ms``,
        ``peak_mib`` and ``tflops``.
    """
    rows = []
    dtype = DTYPES[cfg.dtype]
    points = [
        (backward, n)
        for backward in [p == "forward+backward" for p in cfg.passes]
        for n in cfg.seq_lens
    ]
    for backward, n in progress.track(points, "passes x lengths"):
        shape = (cfg.batch, cfg.heads, n, cfg.head_dim)  # (B, H, N, d)
        flops = 4 * cfg.batch * cfg.heads * n * n * cfg.head_dim
        flops *= (0.5 if cfg.causal else 1) * (2.5 if backward else 1)
        for impl in cfg.impls:
            fn = _attention_fn(impl, cfg.causal, cfg.block)
            ms, peak = measure(fn, shape, dtype, cfg.device, backward, cfg.repeats)
            rows.append(
                {
                    "impl": impl,
                    "pass": PASSES[backward],
                    "N": n,
                    "ms": _sig(ms),
                    "peak_mib": _sig(peak / 2**20),
                    "tflops": _sig(flops / ms / 1e9),
                }
            )
    return {"config": asdict(cfg), "rows": rows}


COLUMNS = {
    "impl": "impl",
    "pass": "pass",
    "N": "T",
    "ms": "ms",
    "peak_mib": "peak MiB",
    "tflops": "TFLOP/s",
}


def attention_table(body: dict[str, Any]) -> Table:
    """The rows of :func:`run_bench` (or of a results file) as a table."""
    c = body["config"]
    note = "Median time; MiB = 2^20 bytes allocated beyond the inputs."
    stamp = (
        f"{c['device']}, {c['dtype']}, B={c['batch']}, H={c['heads']}, "
        f"d={c['head_dim']}, causal={c['causal']}; {c['repeats']} repeats"
    )
    rows = [[r[k] for k in COLUMNS] for r in body["rows"]]
    return Table(list(COLUMNS.values()), rows, note, stamp)
