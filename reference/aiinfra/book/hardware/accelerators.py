"""What ``docs/hardware/accelerators.rst`` shows: the accelerator table as data.

Every number comes from :data:`aiinfra.accelerators.ACCELERATORS` (dense peaks,
the vendors' sparse figures recovered as twice the dense ones).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import ACCELERATORS
from aiinfra.report import Table

_FORMATS = ("fp64", "fp32", "tf32", "bf16", "fp8", "fp4", "int8")


def _tera(key: str, fmt: str, sparse: bool = False) -> float | str:
    try:
        return round(ACCELERATORS[key].peak(fmt, sparse) / 1e12, 1)
    except ValueError:
        return "-"


def peak_table() -> Table:
    """Dense peak per number format of every accelerator, TFLOP/s (TOPS for int8)."""
    rows = [
        [g.name, g.vendor, g.year] + [_tera(k, f) for f in _FORMATS]
        for k, g in ACCELERATORS.items()
    ]
    note = (
        "Dense peaks (TFLOP/s = 1e12 FLOP/s; int8 in 1e12 operations/s) from the "
        "vendors' datasheets; where a sheet prints only the 2:4 sparse figure, half "
        "of it. fp64: the tensor-core (matrix) peak; fp32: without tensor cores. "
        "bf16 = fp16 wherever both are printed. -: not printed."
    )
    columns = ["accelerator", "vendor", "year"] + list(_FORMATS)
    return Table(columns, rows, note)


def memory_table() -> Table:
    """HBM, scale-up link, power and ridge point of every accelerator."""
    rows = []
    for g in ACCELERATORS.values():
        link = f"{g.scale_up} {g.scale_up_bandwidth / 1e9:,.0f}"
        tdp = "-" if g.tdp_watts is None else round(g.tdp_watts)
        pair = "-" if g.pair_bandwidth is None else round(g.pair_bandwidth / 1e9)
        rows.append(
            [
                g.name,
                round(g.hbm_bytes / 1e9),
                g.hbm_bandwidth / 1e12,
                link,
                pair,
                tdp,
                round(g.ridge),
            ]
        )
    note = (
        "HBM capacity (GB = 1e9 bytes; the TPU v5p's is printed as 95 GiB) and "
        "bandwidth (TB/s = 1e12 bytes/s); the scale-up link and its bandwidth per "
        "accelerator summed over all its links, both directions, GB/s; one pair: "
        "what two accelerators get between them (all of it through NVLink "
        "switches, one of seven links on the MI300X; -: a torus has no single "
        "figure); maximum board power (the TPU v5p's is not published); ridge = "
        "dense bf16 peak / HBM bandwidth."
    )
    columns = [
        "accelerator",
        "HBM GB",
        "HBM TB/s",
        "scale-up GB/s (all links)",
        "one pair GB/s",
        "W",
        "ridge FLOP/byte",
    ]
    return Table(columns, rows, note)


def sparse_table(key: str = "H100") -> Table:
    """One accelerator's headline (2:4 sparse) figures beside the dense ones."""
    g = ACCELERATORS[key]
    rows = [
        [fmt, _tera(key, fmt, sparse=True), _tera(key, fmt)]
        for fmt in _FORMATS
        if fmt in g.sparse
    ]
    note = (
        "The sparse figure is what the datasheet prints; it assumes two of every "
        "four weights are zero (2:4 structured sparsity). The book uses the dense "
        "one. TFLOP/s, TOPS for int8."
    )
    return Table(["format", "sparse (printed)", "dense (used)"], rows, note, g.name)


def ratio_table() -> Table:
    """Each format's dense peak over the next wider one, per accelerator."""
    pairs = (("bf16", "fp32"), ("bf16", "tf32"), ("fp8", "bf16"), ("fp4", "fp8"))
    rows = []
    for k, g in ACCELERATORS.items():
        row: list = [g.name]
        for a, b in pairs:
            x, y = _tera(k, a), _tera(k, b)
            row.append("-" if "-" in (x, y) else round(x / y, 1))
        rows.append(row)
    note = (
        "Ratios of dense peaks: how much faster the narrower format runs on the "
        "same chip. -: one of the two is not printed."
    )
    return Table(["accelerator"] + [f"{a} / {b}" for a, b in pairs], rows, note)


def h100_bf16_sparse_tflops() -> float:
    """The H100 SXM's headline BF16 figure, TFLOP/s (2:4 sparse)."""
    return ACCELERATORS["H100"].peak("bf16", sparse=True) / 1e12


def h100_bf16_dense_tflops() -> float:
    """The H100 SXM's dense BF16 peak, TFLOP/s: the one the book divides by."""
    return ACCELERATORS["H100"].peak("bf16") / 1e12


def b200_over_h100_bf16() -> float:
    """Dense BF16 peak of the B200 over the H100's."""
    return ACCELERATORS["B200"].bf16_flops / ACCELERATORS["H100"].bf16_flops


def b200_over_h100_bandwidth() -> float:
    """HBM bandwidth of the B200 over the H100's."""
    return ACCELERATORS["B200"].hbm_bandwidth / ACCELERATORS["H100"].hbm_bandwidth


def tpu_v5p_over_h100_bf16() -> float:
    """Dense BF16 peak of a TPU v5p chip over an H100 SXM's."""
    return ACCELERATORS["TPUv5p"].bf16_flops / ACCELERATORS["H100"].bf16_flops


def compute_bandwidth_figure() -> Figure:
    """Dense BF16 peak against HBM bandwidth of every accelerator, with ridges."""
    fig = Figure(figsize=(6.4, 4), layout="constrained")
    ax = fig.add_subplot()
    bws = [g.hbm_bandwidth / 1e12 for g in ACCELERATORS.values()]
    span = [min(bws) * 0.8, max(bws) * 1.2]
    for ridge in (150, 300):  # constant FLOP/byte lines
        ax.plot(span, [b * ridge for b in span], ":", color="grey", lw=1)
        ax.annotate(  # inside the axes, under the line's end
            f"{ridge} FLOP/byte",
            (span[1], span[1] * ridge),
            textcoords="offset points",
            xytext=(-4, -4),
            fontsize=8,
            ha="right",
            va="top",
            color="grey",
        )
    markers = {"NVIDIA": "o", "AMD": "s", "Google": "^"}
    for g in ACCELERATORS.values():
        x, y = g.hbm_bandwidth / 1e12, g.bf16_flops / 1e12
        ax.scatter([x], [y], marker=markers[g.vendor], s=40, zorder=3)
        left = g is ACCELERATORS["H100"]  # the H200 sits just right of it
        ax.annotate(
            g.name,
            (x, y),
            textcoords="offset points",
            xytext=(-6, 4) if left else (6, -10),
            ha="right" if left else "left",
            fontsize=8,
        )
    ax.set_xlabel("HBM bandwidth (TB/s)")
    ax.set_ylabel("dense BF16 peak (TFLOP/s)")
    ax.set_title("Compute against memory bandwidth")
    ax.grid(True, alpha=0.3)
    return fig
