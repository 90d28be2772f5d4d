"""What ``docs/hardware/roofline.rst`` shows (timings: ``aiinfra bench roofline``)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.hardware import roofline_bench as rb
from aiinfra.report import Table

_GPU = "H100"  # the GPU the page compares this machine with


@cache
def _res() -> dict[str, Any]:
    return results.load("roofline", "cpu")


def _dash(x: float | None, digits: int = 0) -> float | str:
    return "-" if x is None else round(x, digits)


def ridge_table() -> Table:
    """Each GPU's dense peaks and its ridge point per number format."""
    rows = []
    for g in GPUS.values():
        bw = g.hbm_bandwidth
        fp32, fp8 = g.fp32_flops, g.fp8_flops
        rows.append(
            [g.name, g.bf16_flops / 1e12, bw / 1e12, _dash(fp32 and fp32 / bw)]
            + [round(g.ridge), _dash(fp8 and fp8 / bw)]
        )
    note = (
        "Dense peaks and HBM bandwidth from NVIDIA's datasheets (TFLOP/s = 1e12 "
        "FLOP/s, TB/s = 1e12 bytes/s); ridge = peak / bandwidth in FLOP per byte, "
        "for the FP32 (no tensor cores), BF16 and FP8 peaks; -: no peak published."
    )
    columns = ["GPU", "BF16 TFLOP/s", "HBM TB/s", "FP32 ridge", "BF16 ridge"]
    return Table(columns + ["FP8 ridge"], rows, note)


def _stamp(res: dict[str, Any]) -> dict[str, Any]:
    """The measurement's settings and machine: a stamp template and its fields."""
    st, c = res["stamp"], res["config"]
    on, fields = results.run_on(st)
    return {
        "stamp": "{threads} thread(s), fastest of {repeats} repeats, {mib} MiB per "
        "stream array; " + on,
        "fields": {
            **fields,
            "threads": c["threads"],
            "repeats": c["repeats"],
            "mib": c["stream_mib"],
        },
    }


def sweep_table() -> Table:
    """The measured matmul sweep (GFLOP/s) and streaming kernels (GB/s)."""
    res = _res()
    rows = [
        ["matmul", f"{r['m']} x {r['k']} x {r['n']}", r["dtype"]]
        + [round(2 * r["m"] * r["k"] * r["n"] / r["seconds"] / 1e9, 1), ""]
        for r in res["matmuls"]
    ]
    rows += [
        [s["kernel"], "", "float32", "", round(s["bytes"] / s["seconds"] / 1e9, 1)]
        for s in res["streams"]
    ]
    note = (
        "GFLOP/s of each matmul (2 m k n FLOPs) and GB/s of each streaming kernel "
        "(bytes read and written as STREAM counts them: 1, 2 and 3 arrays); the "
        "fastest float32 matmul is the peak, the fastest stream the bandwidth."
    )
    columns = ["kernel", "m x k x n", "dtype", "GFLOP/s", "GB/s"]
    return Table(columns, rows, note, **_stamp(res))


def measured_figure() -> Figure:
    """This machine's measured roofline with the book's kernels on it."""
    return rb.roofline_bench_figure(_res())


def kernel_table() -> Table:
    """The book's kernels: intensity, measured GFLOP/s, roof and share of it."""
    return rb.roofline_bench_table(_res())


def measured_gpu_kernel_table() -> Table | None:
    """The same kernels measured on a GPU, or ``None`` (nothing shown).

    Shown where ``python tools/gpu.py run`` left a stamped file
    (``roofline-cuda.json``): the GPU's own roofs and machine in the stamp.
    """
    res = results.load_optional("roofline", "cuda")
    if res is None:
        return None
    r = res["roofs"]
    on, fields = results.measured_on(res["stamp"])
    fields |= {
        "dtype": res["config"]["dtypes"][0],
        "peak": f"{r['peak_flops'] / 1e12:.1f} TFLOP/s",
        "bandwidth": f"{r['bandwidth'] / 1e12:.2f} TB/s",
        "ridge": f"{r['ridge']:.0f} FLOP/byte",
    }
    # Numbers, units and a machine only: the same in every language.
    stamp = "{dtype}; {peak}, {bandwidth}, {ridge}; " + on
    return replace(rb.roofline_bench_table(res), stamp=stamp, fields=fields)


def cpu_peak_gflops() -> float:
    """The measured float32 peak of this book's CPU, GFLOP/s."""
    return _res()["roofs"]["peak_flops"] / 1e9


def cpu_bandwidth_gbs() -> float:
    """The measured streaming bandwidth of this book's CPU, GB/s."""
    return _res()["roofs"]["bandwidth"] / 1e9


def cpu_ridge() -> float:
    """The measured ridge point of this book's CPU, FLOP per byte."""
    return _res()["roofs"]["ridge"]


def cpu_bf16_slowdown() -> float:
    """How many times slower this CPU's best bf16 matmul is than its fp32 one."""
    by_dtype = _res()["roofs"]["peak_flops_by_dtype"]
    return by_dtype["float32"] / by_dtype["bfloat16"]


def gpu_bf16_over_fp32() -> float:
    """How many times the H100's BF16 tensor-core peak exceeds its FP32 peak."""
    g = GPUS[_GPU]
    return g.bf16_flops / g.peak_flops("fp32")


def gpu_over_cpu_ridge() -> float:
    """The H100's BF16 ridge point over this CPU's measured one."""
    return GPUS[_GPU].ridge / cpu_ridge()


def kernel_share(name: str) -> float:
    """The share of its roof that a kernel of the bench reached on this CPU."""
    return next(p["share"] for p in rb.roofline_points(_res()) if p["name"] == name)


def gpu_kernel_table() -> Table:
    """The same kernels in bf16: the share of peak each roof allows, CPU and H100.

    The FLOPs stay, the bytes halve from fp32 to bf16, so the intensity doubles.
    """
    res, g = _res(), GPUS[_GPU]
    ridge, bpe = cpu_ridge(), rb.DTYPES[res["config"]["dtypes"][0]].itemsize
    rows = []
    for k in res["kernels"]:
        here, bf16 = k["flops"] / k["bytes"], k["flops"] / (k["bytes"] * 2 / bpe)
        rows.append(
            [k["name"], round(here, 1), f"{min(1, here / ridge):.1%}", round(bf16, 1)]
            + [f"{g.attainable(bf16) / g.bf16_flops:.1%}"]
        )
    note = (
        "Most of the peak each roofline allows, min(1, intensity / ridge): on this "
        "CPU with its measured ridge and the kernels as measured, and on the "
        "H100 SXM with its datasheet BF16 ridge and the same kernels in bf16."
    )
    columns = ["kernel", "FLOP / byte", "of CPU peak", "FLOP / byte, bf16"]
    stamp = "CPU ridge {cpu}, {gpu} ridge {gpu_ridge} FLOP/byte"
    fields = {"cpu": f"{ridge:.1f}", "gpu": g.name, "gpu_ridge": f"{g.ridge:.0f}"}
    return Table(columns + [f"of {_GPU} peak"], rows, note, stamp, fields=fields)
