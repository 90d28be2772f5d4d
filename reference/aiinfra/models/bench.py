"""``aiinfra bench attention``: time and memory of four attention implementations.

Compares standard attention (``N x N`` scores in memory), the tiled PyTorch
FlashAttention of :mod:`aiinfra.models.flash_attention`, the Triton kernel of
:mod:`aiinfra.models.flash_triton` (GPU only; backward in
:mod:`aiinfra.models.flash_triton_backward`) and PyTorch's
``scaled_dot_product_attention`` over sequence lengths. Time is the median of
``--repeats`` runs after one warm-up; memory is the peak of what the call allocates
beyond its inputs (``torch.cuda.max_memory_allocated`` on a GPU,
:class:`~aiinfra.models.attention_memory.PeakMemory` on the CPU, measured in a
separate run because tracking slows the call down). Throughput counts the matmul
FLOPs ``4 B H N^2 d`` of the forward pass (half when causal) and 2.5 times that
for forward plus backward, the convention of the FlashAttention papers. The
defaults are small on the CPU and realistic on a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra.models.attention_memory import PeakMemory
from aiinfra.models.flash_attention import flash_attention, standard_attention
from aiinfra.report import Table

IMPLEMENTATIONS = ("standard", "tiled", "triton", "sdpa")
DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``aiinfra bench attention`` to ``parser``."""
    parser.add_argument(
        "--impl",
        nargs="+",
        choices=IMPLEMENTATIONS,
        help="implementations (default: all that run on the device)",
    )
    parser.add_argument(
        "--seq-lens",
        type=int,
        nargs="+",
        metavar="N",
        help="sequence lengths (default 128 256 512 on the CPU, "
        "1024 2048 4096 on a GPU)",
    )
    parser.add_argument("--batch", type=int, default=1, help="batch size B")
    parser.add_argument("--heads", type=int, help="heads H (default 2 CPU, 16 GPU)")
    parser.add_argument("--head-dim", type=int, default=64, help="head dimension d")
    parser.add_argument(
        "--dtype",
        choices=sorted(DTYPES),
        help="element type (default float32 CPU, bfloat16 GPU)",
    )
    parser.add_argument("--causal", action="store_true", help="causal mask")
    parser.add_argument(
        "--backward",
        action="store_true",
        help="time forward + backward",
    )
    parser.add_argument(
        "--block", type=int, default=64, help="block size of the tiled PyTorch version"
    )
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per point")
    parser.add_argument("--json", action="store_true", help="print JSON, not text")


def _settings(args: argparse.Namespace) -> dict:
    """Fill defaults by device and check every option; raise ValueError if bad."""
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    gpu = device == "cuda"
    impls = args.impl or [i for i in IMPLEMENTATIONS if gpu or i != "triton"]
    if "triton" in impls and not gpu:
        raise ValueError(
            "--impl triton needs a CUDA device (use the tests for the CPU interpreter)"
        )
    seq_lens = args.seq_lens or ([1024, 2048, 4096] if gpu else [128, 256, 512])
    heads = args.heads if args.heads is not None else (16 if gpu else 2)
    for name, value in (
        ("--seq-lens", min(seq_lens)),
        ("--batch", args.batch),
        ("--heads", heads),
        ("--head-dim", args.head_dim),
        ("--block", args.block),
        ("--repeats", args.repeats),
    ):
        if value < 1:
            raise ValueError(f"{name} must be positive, got {value}")
    if "triton" in impls and (
        args.head_dim < 16 or args.head_dim & (args.head_dim - 1)
    ):
        raise ValueError(
            f"--head-dim must be a power of two >= 16 for triton, got {args.head_dim}"
        )
    dtype = DTYPES[args.dtype or ("bfloat16" if gpu else "float32")]
    return {
        "device": device,
        "impls": impls,
        "seq_lens": seq_lens,
        "heads": heads,
        "dtype": dtype,
    }


def _attention_fn(impl: str, causal: bool, block: int) -> Callable[..., Tensor]:
    if impl == "standard":
        return lambda q, k, v: standard_attention(q, k, v, causal)
    if impl == "tiled":
        return lambda q, k, v: flash_attention(
            q, k, v, causal, block_q=block, block_k=block
        )
    if impl == "sdpa":
        return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    from aiinfra.models.flash_triton_backward import flash_attention_triton

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


def run(args: argparse.Namespace) -> int:
    """Run the benchmark; print a table (or JSON). Returns the exit status.

    Returns:
        0 on success, 2 (after a message on stderr) for invalid options.
    """
    try:
        s = _settings(args)
    except ValueError as exc:
        print(f"aiinfra bench attention: error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for n in s["seq_lens"]:
        shape = (args.batch, s["heads"], n, args.head_dim)  # (B, H, N, d)
        flops = 4 * args.batch * s["heads"] * n * n * args.head_dim
        flops *= (0.5 if args.causal else 1) * (2.5 if args.backward else 1)
        for impl in s["impls"]:
            fn = _attention_fn(impl, args.causal, args.block)
            ms, peak = measure(
                fn, shape, s["dtype"], s["device"], args.backward, args.repeats
            )
            rows.append([impl, n, _sig(ms), _sig(peak / 2**20), _sig(flops / ms / 1e6)])
    note = (
        f"{s['device']}, {str(s['dtype']).removeprefix('torch.')}, "
        f"B={args.batch}, H={s['heads']}, d={args.head_dim}, "
        f"causal={args.causal}, {'forward+backward' if args.backward else 'forward'}"
        f"; median of {args.repeats}; MiB = 2^20 bytes beyond the inputs."
    )
    table = Table(["impl", "N", "ms", "peak MiB", "GFLOP/s"], rows, note)
    print(table.to_json() if args.json else table.to_text())
    return 0
