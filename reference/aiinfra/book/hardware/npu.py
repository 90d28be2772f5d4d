"""What ``docs/hardware/npu.rst`` shows: an Ascend NPU beside NVIDIA's GPUs.

The 910C's numbers are :data:`aiinfra.accelerators.NPUS` (from the CloudMatrix384
paper), the GPUs' :data:`aiinfra.accelerators.ACCELERATORS`; the Cube, the Atlas
800T A2 node and CloudMatrix384 are :mod:`aiinfra.hardware.npu`; the all-to-all is
the clusters page's cost model (:func:`aiinfra.hardware.rails.all_to_all_seconds`),
with its group and bytes. Nothing here ran on an NPU.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter

from aiinfra.accelerators import ACCELERATORS, NPUS
from aiinfra.book.hardware.clusters import EP_BYTES, EP_GROUP
from aiinfra.hardware import npu, rails
from aiinfra.models.roofline import roofline_kernels
from aiinfra.report import Table

_CHIPS = (NPUS["910C"], ACCELERATORS["H100"], ACCELERATORS["B200"])
_DOMAINS = (rails.HGX_H100, rails.GB200_NVL72, npu.CLOUDMATRIX384)
#: The expert-parallel group CloudMatrix-Infer runs DeepSeek-R1's decode on (EP320).
LARGE_EP = 320
#: The GEMM of the Cube figure: k = n = 4096 (a Llama 3 8B projection), m tokens.
CUBE_K = 4096
_CUBE_MS = range(1, 129)


def chip_table() -> Table:
    """The 910C beside the H100 and the B200: peak, HBM, links, ridge."""
    rows = []
    for g in _CHIPS:
        rows.append(
            [
                g.name,
                g.vendor,
                round(g.bf16_flops / 1e12),
                round(g.hbm_bytes / 1e9),
                g.hbm_bandwidth / 1e12,
                g.scale_up,
                round(g.scale_up_bandwidth / 2 / 1e9),
                round(g.ridge),
            ]
        )
    note = (
        "Dense BF16 peak (TFLOP/s = 1e12 FLOP/s), HBM (GB = 1e9 bytes, TB/s), the "
        "scale-up link and its bandwidth per chip in each direction (GB/s), ridge = "
        "peak / HBM bandwidth. Ascend 910C: Zuo et al. 2025 (the CloudMatrix384 "
        "paper; Huawei publishes no datasheet); H100, B200: NVIDIA's datasheets."
    )
    columns = [
        "chip",
        "vendor",
        "BF16 TFLOP/s",
        "HBM GB",
        "HBM TB/s",
        "scale-up",
        "GB/s each way",
        "ridge FLOP/byte",
    ]
    return Table(columns, rows, note)


def roofline_npu_figure() -> Figure:
    """Attainable BF16 TFLOP/s against intensity for the 910C, H100 and B200."""
    fig = Figure(figsize=(8, 4), layout="constrained")
    ax = fig.add_subplot()
    xs = [2.0**e for e in range(-1, 13)]
    for g, style in zip(_CHIPS, ("-", "--", ":"), strict=True):
        ax.loglog(xs, [g.attainable(x) / 1e12 for x in xs], style, label=g.name)
        ax.plot([g.ridge], [g.bf16_flops / 1e12], "o", color=ax.lines[-1].get_color())
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable TFLOP/s (BF16)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left")
    return fig


def kernel_share_table() -> Table:
    """The roofline page's kernels: the share of each chip's BF16 peak they reach."""
    rows = [
        [k.name, round(k.intensity, 1)]
        + [f"{g.attainable(k.intensity) / g.bf16_flops:.1%}" for g in _CHIPS]
        for k, _, _ in roofline_kernels()
    ]
    note = (
        "The kernels of the models chapter's roofline (bf16, compulsory HBM "
        "traffic); each chip's column: min(1, intensity / ridge)."
    )
    return Table(["kernel", "FLOP / byte"] + [g.name for g in _CHIPS], rows, note)


def mla_absorbed_intensity() -> float:
    """FLOP per byte of the absorbed MLA decode kernel of the roofline page."""
    return next(k.intensity for k, _, _ in roofline_kernels() if "absorbed" in k.name)


def ridge_910c() -> float:
    """The 910C's ridge point, FLOP per byte (752 TFLOP/s over 3.2 TB/s)."""
    return NPUS["910C"].ridge


def ridge_h100() -> float:
    """The H100's ridge point, FLOP per byte."""
    return ACCELERATORS["H100"].ridge


def units_table() -> Table:
    """The Da Vinci AI Core's units beside an SM's, level by level."""
    rows = [
        ["matrix", "Cube unit: 16 x 16 x 16 fp16 per instruction", "tensor cores"],
        ["vector", "Vector unit, reads only the Unified Buffer", "CUDA cores"],
        ["control", "Scalar unit: loops, addresses, issue", "warp schedulers"],
        ["matrix inputs", "L0A, L0B (filled by MTE1 from L1)", "registers"],
        ["accumulators", "L0C", "registers"],
        ["staging", "L1 buffer, Unified Buffer", "shared memory"],
        ["moves", "MTE and FixPipe instructions in the kernel", "loads, TMA"],
    ]
    note = (
        "Da Vinci: the Ascend C guide of CANN (A2 products: Cube and Vector in "
        "separate cores); SM: NVIDIA's Hopper whitepaper. A GPU also caches global "
        "memory in L1 and L2 by itself; an AI Core's buffers hold only what the "
        "kernel moves there."
    )
    return Table(["role", "Da Vinci AI Core", "SM"], rows, note, words=(0, 1, 2))


def cube_figure() -> Figure:
    """Share of the Cube's work that is useful against the m of an m x 4096 GEMM."""
    fig = Figure(figsize=(8, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ys = [100 * npu.cube_utilization(m, CUBE_K, CUBE_K) for m in _CUBE_MS]
    ax.step(list(_CUBE_MS), ys, where="post")
    ax.set_xlabel("rows m (tokens)")
    ax.set_ylabel("useful Cube work (%)")
    ax.set_ylim(0, 105)
    ax.grid(True, alpha=0.3)
    return fig


def cube_side() -> int:
    """Side of the Cube's fp16 fractal."""
    return npu.CUBE


def fractal_bytes() -> int:
    """Bytes of one fp16 fractal, the L0A/L0B alignment."""
    return npu.FRACTAL_BYTES


def decode_cube_share() -> float:
    """Useful share of the Cube for one token (m = 1) times a 4096 x 4096 weight."""
    return npu.cube_utilization(1, CUBE_K, CUBE_K)


def ragged_cube_share() -> float:
    """Useful share of the Cube at m = 17, one row past a whole fractal."""
    return npu.cube_utilization(npu.CUBE + 1, CUBE_K, CUBE_K)


def node_figure() -> Figure:
    """The Atlas 800T A2 node drawn from the model: HCCS mesh, one port per NPU."""
    node = npu.AtlasNode()
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax = fig.add_subplot()
    xs = [1.3 * i for i in range(node.npus)]
    for a, b in node.hccs_links():  # every pair: an arc above the row
        mid, half = (xs[a] + xs[b]) / 2, (xs[b] - xs[a]) / 2
        t = [i / 20 for i in range(21)]
        arc_x = [mid - half + 2 * half * s for s in t]
        arc_y = [2.25 + 0.35 * (b - a) * 4 * s * (1 - s) for s in t]
        ax.plot(arc_x, arc_y, color="tab:green", lw=0.6)
    for i, x in enumerate(xs):
        ax.add_patch(_box(x, 2.0, 0.9, "#9fc5e8"))
        ax.text(x, 2.0, f"NPU {i}", ha="center", va="center", fontsize=8)
        ax.add_patch(_box(x, 1.0, 0.8, "#f9cb9c"))
        ax.text(x, 1.0, "RoCE", ha="center", va="center", fontsize=8)
        ax.plot([x, x], [1.75, 1.25], color="black", lw=0.8)
        ax.plot([x, x], [0.75, 0.25], color="tab:orange", lw=0.8)
    span = xs[-1]
    ax.add_patch(_box(span / 2, 0.0, span + 0.9, "#fce5cd"))
    ax.text(span / 2, 0.0, "leaf switches", ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.8, span + 0.8)
    ax.set_ylim(-0.5, 2.25 + 0.35 * node.npus)
    ax.axis("off")
    ax.set_title("Atlas 800T A2: HCCS between every pair, RoCE from every NPU")
    return fig


def _box(x: float, y: float, w: float, color: str):  # noqa: ANN202
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch(
        (x - w / 2, y - 0.25), w, 0.5, boxstyle="round,pad=0.02", fc=color, ec="black"
    )


def hccs_links() -> int:
    """HCCS links in one Atlas 800T A2 server (one per pair of NPUs)."""
    return len(npu.AtlasNode().hccs_links())


def hccs_links_per_npu() -> int:
    """HCCS links at one NPU of the server."""
    return npu.AtlasNode().links_per_npu()


def scale_up_npu_table() -> Table:
    """HGX H100, GB200 NVL72 and CloudMatrix384: domain, links, two all-to-alls."""
    rows = []
    for d in _DOMAINS:
        ms = [
            round(rails.all_to_all_seconds(d, g, EP_BYTES) * 1e3, 2)
            for g in (EP_GROUP, LARGE_EP)
        ]
        rows.append(
            [d.name, d.gpus, round(d.nvlink_gbps / 8), round(d.nic_gbps / 8), *ms]
        )
    return Table(
        [
            "system",
            "chips per domain",
            "scale-up GB/s",
            "scale-out GB/s",
            "all-to-all, small group (ms)",
            "all-to-all, large group (ms)",
        ],
        rows,
        note="Per chip and direction (NVIDIA datasheets; CloudMatrix384: Zuo et al. "
        "2025, UB and RDMA planes). All-to-all: {mib} MiB sent by each chip, "
        "bandwidth term only, non-blocking fabric, the clusters page's model; "
        "small group: {small} chips, large group: {large} (CloudMatrix-Infer's EP).",
        fields={"small": EP_GROUP, "large": LARGE_EP, "mib": EP_BYTES // 2**20},
    )


def alltoall_figure() -> Figure:
    """All-to-all time against group size on HGX H100, NVL72 and CloudMatrix384."""
    fig = Figure(figsize=(8, 3.8), layout="constrained")
    ax = fig.add_subplot()
    groups = list(range(8, npu.CM384_NPUS + 1, 8))
    for d, style in zip(_DOMAINS, ("--", ":", "-"), strict=True):
        ms = [rails.all_to_all_seconds(d, g, EP_BYTES) * 1e3 for g in groups]
        ax.plot(groups, ms, style, label=d.name)
    ax.set_xlabel("chips in the all-to-all")
    ax.set_ylabel("time (ms)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    return fig


def _a2a(domain: rails.ScaleUpDomain, group: int) -> float:
    return rails.all_to_all_seconds(domain, group, EP_BYTES)


def small_ep_nvl72_speedup() -> float:
    """How many times faster NVL72 runs the 64-chip all-to-all than CloudMatrix384."""
    return _a2a(npu.CLOUDMATRIX384, EP_GROUP) / _a2a(rails.GB200_NVL72, EP_GROUP)


def large_ep_cm384_speedup() -> float:
    """How many times faster CloudMatrix384 runs the 320-chip all-to-all than NVL72."""
    return _a2a(rails.GB200_NVL72, LARGE_EP) / _a2a(npu.CLOUDMATRIX384, LARGE_EP)


def ub_over_nvlink5() -> float:
    """A 910C's UB bandwidth as a share of a B200's NVLink 5, each way."""
    return npu.CLOUDMATRIX384.nvlink_gbps / rails.GB200_NVL72.nvlink_gbps


def atlas_npus() -> int:
    """NPUs in one Atlas 800T A2 server."""
    return npu.AtlasNode().npus


def domain_chips(system: str) -> int:
    """Chips in one scale-up domain of ``"GB200 NVL72"`` or ``"CloudMatrix384"``."""
    return {d.name: d.gpus for d in _DOMAINS}[system]


def domain_ratio() -> float:
    """CloudMatrix384's scale-up domain over NVL72's, in chips."""
    return npu.CLOUDMATRIX384.gpus / rails.GB200_NVL72.gpus


def rdma_gbps() -> float:
    """RDMA bandwidth of one CloudMatrix384 NPU, Gb/s each way."""
    return npu.CM384_RDMA_GBPS
