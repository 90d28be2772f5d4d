"""This machine's roofline, measured: matmuls, streaming kernels, the book's kernels.

The roofline (Williams, Waterman & Patterson 2009) bounds a kernel of arithmetic
intensity ``I`` (FLOP per byte moved to and from memory) by ``min(F_max, I W)``.
Here both roofs are measured rather than read from a datasheet: ``F_max`` is the
fastest matmul of a sweep of square and skinny shapes, ``W`` the fastest of three
streaming kernels in the style of STREAM (McCalpin 1995) over arrays far larger
than the caches: read (``sum a``), copy (``b = a``) and triad (``a = b + s c``).
The book's own kernels, a decode GEMV, a batched decode GEMM, a prefill GEMM, one
decode step of attention over a long cache, and a prefill attention block computed
as written (``softmax(Q K^T) V``) and fused (PyTorch's SDPA), are then placed on it:
their measured FLOP/s against the intensity of their compulsory traffic
(:mod:`aiinfra.models.roofline`). :func:`run_roofline_bench` measures,
:func:`stamp_roofline_bench` writes ``docs/_data/bench/roofline-cpu.json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from aiinfra import results
from aiinfra.models.roofline import Kernel, matmul, prefill_attention
from aiinfra.report import Table
from aiinfra.timing import best_seconds, cuda_wall_clock

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); measuring does not
    from matplotlib.figure import Figure

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class RooflineBenchConfig:
    """What to time; the defaults take well under a minute on one CPU core.

    Raises:
        ValueError: a size is not a positive integer, a tuple is empty, or a dtype
            is not one of :data:`DTYPES`.
    """

    square: tuple[int, ...] = (256, 512, 1024)  # n of the n x n x n matmuls
    skinny: tuple[int, ...] = (1, 16, 64)  # m of m x n x n, n the largest square
    dtypes: tuple[str, ...] = ("float32", "bfloat16")  # first: skinny, kernels, roof
    stream_mib: int = 128  # MiB per array: four times a 32 MiB last-level cache
    d_model: int = 2048  # d: a 2048 x 8192 fp32 weight is 64 MiB, beyond the caches
    d_ff: int = 8192
    batch: int = 16  # sequences of the batched decode GEMM
    prefill_tokens: int = 256  # T of the prefill GEMM
    heads: int = 8  # H
    head_dim: int = 64  # d_h
    seq_len: int = 1024  # T of the attention block
    context: int = 16384  # cached tokens read by one decode step of attention
    repeats: int = 5
    threads: int = 1  # a shared machine: one thread

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "dtypes":
                if not value or any(v not in DTYPES for v in value):
                    raise ValueError(f"dtypes must be some of {list(DTYPES)}: {value}")
                continue
            values = value if isinstance(value, tuple) else (value,)
            if not values or any(
                isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values
            ):
                raise ValueError(f"{name} must be positive integers, got {value!r}")


#: About a second, for tests: the streams fit the last-level cache, the decode
#: kernels' operands do not, so the measured bandwidth bounds them on a busy machine.
SMOKE = RooflineBenchConfig(
    square=(128, 256),
    skinny=(1, 8),
    dtypes=("float32",),
    stream_mib=2,
    d_model=1024,
    d_ff=4096,
    batch=8,
    prefill_tokens=32,
    heads=2,
    head_dim=32,
    seq_len=128,
    context=16384,
    repeats=2,
)


Timer = Callable[[Callable[[], object]], float]


def _matmul_sweep(
    cfg: RooflineBenchConfig, g: torch.Generator, time_s: Timer
) -> list[dict[str, Any]]:
    """Square matmuls in every dtype, skinny ones (``m`` rows) in the first."""
    n_max, rows = max(cfg.square), []
    shapes = [(n, n, n) for n in cfg.square]
    for i, dtype in enumerate(cfg.dtypes):
        skinny = [(m, n_max, n_max) for m in cfg.skinny] if i == 0 else []
        for m, k, n in shapes + skinny:
            a = torch.randn(m, k, generator=g, device=g.device).to(DTYPES[dtype])
            b = torch.randn(k, n, generator=g, device=g.device).to(DTYPES[dtype])
            s = time_s(lambda a=a, b=b: a @ b)  # (m, n)
            rows.append({"m": m, "k": k, "n": n, "dtype": dtype, "seconds": s})
    return rows


def _streams(
    cfg: RooflineBenchConfig, device: torch.device, time_s: Timer
) -> list[dict[str, Any]]:
    n = cfg.stream_mib * 2**18  # fp32 elements per array
    a, b, c = (torch.ones(n, device=device) for _ in range(3))
    kernels = {  # name: (call, bytes read + written, as STREAM counts them)
        "read": (a.sum, 4 * n),
        "copy": (lambda: b.copy_(a), 8 * n),
        "triad": (lambda: torch.add(b, c, alpha=3.0, out=a), 12 * n),
    }
    return [
        {"kernel": k, "bytes": q, "seconds": time_s(fn)}
        for k, (fn, q) in kernels.items()
    ]


def _kernels(
    cfg: RooflineBenchConfig, g: torch.Generator, time_s: Timer
) -> list[tuple[str, Kernel, float]]:
    """The book's kernels in the first dtype: (name, counted FLOPs and bytes, s)."""
    dt, bpe = DTYPES[cfg.dtypes[0]], DTYPES[cfg.dtypes[0]].itemsize
    d, f, H, D = cfg.d_model, cfg.d_ff, cfg.heads, cfg.head_dim
    T, S = cfg.seq_len, cfg.context

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=g.device).to(dt)

    w, rows = randn(d, f), []
    gemms = {"decode GEMV": 1, "decode GEMM, batched": cfg.batch}
    for name, m in (gemms | {"prefill GEMM": cfg.prefill_tokens}).items():
        x = randn(m, d)
        k = matmul(m, d, f, bpe)
        rows.append((name, k, time_s(lambda x=x: x @ w)))  # (m, d_ff)
    q, kc, vc = randn(1, H, 1, D), randn(1, H, S, D), randn(1, H, S, D)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    decode = Kernel("decode attention", 4 * H * S * D, 2 * H * S * D * bpe)  # K, V
    rows.append(("decode attention", decode, time_s(lambda: sdpa(q, kc, vc))))
    q, k, v = randn(1, H, T, D), randn(1, H, T, D), randn(1, H, T, D)

    def as_written() -> torch.Tensor:
        return torch.softmax(q @ k.transpose(-1, -2) * D**-0.5, -1) @ v  # (1,H,T,D)

    blocks = (("attention, as written", False, as_written),)
    for name, flash, fn in (*blocks, ("attention, fused", True, lambda: sdpa(q, k, v))):
        one = prefill_attention(T, D, flash, bpe)  # one head
        rows.append((name, Kernel(name, H * one.flops, H * one.bytes), time_s(fn)))
    return rows


def run_roofline_bench(
    cfg: RooflineBenchConfig, device: str | torch.device = "cpu", seed: int = 0
) -> dict[str, Any]:
    """Measure the two roofs and place the book's kernels; returns the JSON body.

    Args:
        cfg: what to time.
        device: ``"cpu"`` (the thread's CPU time) or ``"cuda"`` (synchronized wall
            time).
        seed: of the random operands.

    Returns:
        ``{"config", "matmuls", "streams", "kernels", "roofs"}``: seconds of each
        matmul and streaming kernel, each kernel's counted FLOPs and bytes and its
        seconds, and the roofs: ``peak_flops`` (fastest matmul in the first dtype),
        ``peak_flops_by_dtype``, ``bandwidth`` (fastest stream, bytes/s) and
        ``ridge`` (FLOP/byte).
    """
    device = torch.device(device)
    clock = time.thread_time if device.type == "cpu" else cuda_wall_clock
    g = torch.Generator(device).manual_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)

    def time_s(fn: Callable[[], object]) -> float:  # the fastest repeat, seconds
        return best_seconds(fn, cfg.repeats, None, clock)

    try:
        with torch.no_grad():
            matmuls = _matmul_sweep(cfg, g, time_s)
            streams = _streams(cfg, device, time_s)
            kernels = [
                {"name": n, "flops": k.flops, "bytes": k.bytes, "seconds": s}
                for n, k, s in _kernels(cfg, g, time_s)
            ]
    finally:
        torch.set_num_threads(threads)
    by_dtype = {
        dt: max(2 * r["m"] * r["k"] * r["n"] / r["seconds"] for r in rows)
        for dt in cfg.dtypes
        if (rows := [r for r in matmuls if r["dtype"] == dt])
    }
    peak = by_dtype[cfg.dtypes[0]]
    bandwidth = max(r["bytes"] / r["seconds"] for r in streams)
    roofs = {"peak_flops": peak, "peak_flops_by_dtype": by_dtype}
    roofs |= {"bandwidth": bandwidth, "ridge": peak / bandwidth}
    body = {"config": asdict(cfg) | {"device": device.type}, "matmuls": matmuls}
    return body | {"streams": streams, "kernels": kernels, "roofs": roofs}


def stamp_roofline_bench(
    body: dict[str, Any], path: str | Path | None = None, backend: str = "cpu"
) -> Path:
    """Stamp ``body`` (machine, date, versions) and write it; returns the path."""
    return results.write("roofline", body, backend=backend, world_size=1, path=path)


def load_roofline_bench(
    path: str | Path | None = None, backend: str = "cpu"
) -> dict[str, Any]:
    """Read the stamped file (default: the book's ``roofline-cpu.json``).

    Raises:
        FileNotFoundError: no file; the message names the command that writes it.
    """
    return results.load("roofline", backend, path)


def attainable(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """``min(F_max, I W)``: the roofline at intensity ``I`` FLOP/byte, FLOP/s."""
    return min(peak_flops, intensity * bandwidth)


def roofline_points(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Each kernel's intensity, measured FLOP/s and the share of its roof it reached.

    Returns:
        One dict per kernel: ``name``, ``intensity`` (FLOP/byte), ``flops_per_s``,
        ``roof`` (``min(F_max, I W)``, FLOP/s) and ``share`` (measured / roof).
    """
    peak, bw = res["roofs"]["peak_flops"], res["roofs"]["bandwidth"]
    points = []
    for k in res["kernels"]:
        intensity, rate = k["flops"] / k["bytes"], k["flops"] / k["seconds"]
        roof = attainable(intensity, peak, bw)
        points.append(
            {"name": k["name"], "intensity": intensity, "flops_per_s": rate}
            | {"roof": roof, "share": rate / roof}
        )
    return points


def roofline_bench_table(res: dict[str, Any]) -> Table:
    """The kernels' intensity, measured GFLOP/s, roof and share of it."""
    rows = [
        [p["name"], round(p["intensity"], 2), round(p["flops_per_s"] / 1e9, 1)]
        + [round(p["roof"] / 1e9, 1), f"{p['share']:.0%}"]
        for p in roofline_points(res)
    ]
    note = (
        "Intensity: FLOPs over the compulsory bytes (each operand read, each result "
        "written once); roof: min(measured peak, intensity x measured bandwidth)."
    )
    st, c, r = res["stamp"], res["config"], res["roofs"]
    on, fields = results.run_on(st)
    stamp = (
        "{dtype}, {threads} thread(s); peak {peak} GFLOP/s, bandwidth {bandwidth} "
        "GB/s, ridge {ridge} FLOP/byte; " + on
    )
    fields |= {
        "dtype": c["dtypes"][0],
        "threads": c["threads"],
        "peak": f"{r['peak_flops'] / 1e9:.1f}",
        "bandwidth": f"{r['bandwidth'] / 1e9:.1f}",
        "ridge": f"{r['ridge']:.1f}",
    }
    columns = ["kernel", "FLOP / byte", "GFLOP/s", "roof GFLOP/s", "of roof"]
    return Table(columns, rows, note, stamp, fields=fields)


def roofline_bench_figure(res: dict[str, Any]) -> Figure:
    """Log-log roofline of the measured roofs, with the kernels as points."""
    from matplotlib.figure import Figure

    peak, bw = res["roofs"]["peak_flops"], res["roofs"]["bandwidth"]
    points = roofline_points(res)
    lo = min(0.5 * min(p["intensity"] for p in points), 0.1)
    hi = max(2 * max(p["intensity"] for p in points), 4 * peak / bw)
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    fig = Figure(figsize=(8.5, 4), layout="constrained")
    ax = fig.add_subplot()
    ax.loglog(xs, [attainable(x, peak, bw) / 1e9 for x in xs], color="black")
    ax.axvline(peak / bw, color="grey", linestyle=":", linewidth=1)
    for p, m in zip(points, "ov^sDP<>", strict=False):
        ax.loglog([p["intensity"]], [p["flops_per_s"] / 1e9], m, label=p["name"])
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("GFLOP/s")
    lo_y, hi_y = ax.get_ylim()
    ticks = [b * 10.0**e for e in range(-3, 7) for b in (1, 2, 5)]
    ax.set_yticks([t for t in ticks if lo_y <= t <= hi_y])
    ax.yaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_minor_formatter("")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig
