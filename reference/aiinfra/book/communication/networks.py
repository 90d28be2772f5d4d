"""Values, tables and figures of ``docs/communication/networks.rst``.

The incast numbers are simulated by :mod:`aiinfra.comm.incast` (slots and packets,
turned into time and bandwidth with :data:`PACKET_BYTES` at :data:`LINK_GBITS`);
the scale-up bandwidths are the datasheets' of :data:`aiinfra.accelerators.GPUS`,
the NICs per GPU those of NVIDIA's DGX systems (:data:`NIC_GBITS_PER_GPU`).
"""

from __future__ import annotations

from functools import cache

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from aiinfra.accelerators import GPUS
from aiinfra.comm import incast
from aiinfra.comm.incast import MODES, IncastConfig, IncastResult, simulate_incast
from aiinfra.report import Table

PACKET_BYTES = 4096  # a RoCE / InfiniBand MTU of 4 KiB
LINK_GBITS = 400  # every link of the simulation, Gb/s
BURST = IncastConfig(packets_per_sender=32, buffer_packets=64)  # the N sweep
#: Long bursts, so that DCQCN has time to converge; the victim offers half a link.
STEADY = IncastConfig(senders=16, packets_per_sender=128, victim_rate=0.5)
#: The N of the incast the text quotes: the long-burst run's senders.
FOCUS_SENDERS = STEADY.senders
SENDERS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)  # the x axis of the N sweep
#: The NIC bandwidth per GPU of NVIDIA's 8-GPU systems, Gb/s: DGX A100, eight
#: 200 Gb/s ConnectX-6 (docs.nvidia.com/dgx/dgxa100-user-guide); DGX H100 and DGX
#: H200, eight 400 Gb/s ConnectX-7 (docs.nvidia.com/dgx/dgxh100-user-guide).
NIC_GBITS_PER_GPU = {"A100": 200, "H100": 400, "H200": 400}
_LABEL = {"lossy": "lossy (drop, resend)", "pfc": "PFC", "ecn": "ECN + DCQCN"}
_COLOR = {"lossy": "tab:red", "pfc": "tab:blue", "ecn": "tab:green"}


def _slot_us() -> float:  # one packet time on one link, microseconds
    return PACKET_BYTES * 8 / (LINK_GBITS * 1e9) * 1e6


@cache
def _run(mode: str, config: IncastConfig, senders: int) -> IncastResult:  # one burst
    fields = {k: getattr(config, k) for k in config.__dataclass_fields__}
    return simulate_incast(mode, IncastConfig(**{**fields, "senders": senders}))


# RDMA


def data_path_figure() -> Figure:
    """The path of a message through a TCP socket and through RDMA, side by side."""
    fig = Figure(figsize=(7.5, 3.4), layout="constrained")
    axes = fig.subplots(1, 2)
    steps = (  # title, boxes top down, what each arrow does, a note
        (
            "TCP/IP socket",
            ["application buffer", "kernel socket buffer", "NIC"],
            ["copy by the CPU", "TCP/IP by the CPU, then DMA"],
            "a system call and a copy per message",
        ),
        (
            "RDMA",
            ["registered buffer", "NIC"],
            ["DMA by the NIC, no copy"],
            "the CPU only posts a work request",
        ),
    )
    for ax, (title, boxes, arrows, note) in zip(axes, steps, strict=True):
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.9, 4.6)
        ax.axis("off")
        ax.set_title(title)
        ys = [4.0 - i * 4.0 / (len(boxes) - 1) for i in range(len(boxes))]
        for y, box in zip(ys, boxes, strict=True):
            patch = FancyBboxPatch(
                (0.1, y - 0.3), 0.8, 0.6, "round,pad=0.02", fc="#dbe8f5", ec="k"
            )
            ax.add_patch(patch)
            ax.text(0.5, y, box, ha="center", va="center")
        for y0, y1, arrow in zip(ys[:-1], ys[1:], arrows, strict=True):
            style = {"arrowstyle": "->", "lw": 1.5}
            ax.annotate("", (0.25, y1 + 0.32), (0.25, y0 - 0.32), arrowprops=style)
            color = "tab:red" if "CPU" in arrow else "tab:green"
            ax.text(0.3, (y0 + y1) / 2, arrow, va="center", color=color)
        ax.text(0.5, -0.75, note, ha="center", style="italic")
    return fig


# InfiniBand and RoCE


def ib_roce_table() -> Table:
    """InfiniBand against RoCE v2: what each layer is and who runs it."""
    rows = [
        ["link layer", "InfiniBand", "Ethernet"],
        ["network layer", "InfiniBand, subnet manager", "IP, UDP port 4791"],
        ["transport", "IB RC, UC, UD", "IB RC, UC, UD"],
        ["no loss by", "link credits", "PFC"],
        ["congestion control", "IB CC (FECN, BECN)", "ECN + DCQCN"],
        ["switches", "InfiniBand", "Ethernet"],
        ["example", "Llama 3 (smaller models)", "Llama 3 405B, Meta's RoCE clusters"],
    ]
    return Table(
        ["layer", "InfiniBand", "RoCE v2"],
        rows,
        note="Both carry the same verbs and transport; they differ below it.",
        words=(0, 1, 2),
    )


# Incast


def slot_ns() -> float:
    """One packet time, the simulation's slot: a 4 KiB packet at 400 Gb/s, ns."""
    return _slot_us() * 1e3


def rto_us() -> float:
    """The simulation's retransmission timeout, microseconds."""
    return BURST.rto_slots * _slot_us()


def rc_timeout_s(timeout: int) -> float:
    """An RDMA RC queue pair's retransmission timeout at ``NCCL_IB_TIMEOUT``, s."""
    return incast.rc_timeout_s(timeout)


def nccl_ib_timeout() -> int:
    """``NCCL_IB_TIMEOUT`` when unset, in current NCCL."""
    return incast.NCCL_IB_TIMEOUT_DEFAULT


def tcp_rto_min_ms() -> float:
    """Linux's minimum TCP retransmission timeout, ms."""
    return incast.TCP_RTO_MIN_S * 1e3


def burst_kib() -> float:
    """The burst each sender sends in the N sweep, KiB."""
    return BURST.packets_per_sender * PACKET_BYTES / 1024


def buffer_kib() -> float:
    """The buffer of one switch port in the simulation, KiB."""
    return BURST.buffer_packets * PACKET_BYTES / 1024


def lossy_fits_senders() -> int:
    """The most senders whose burst the lossy port takes without a drop."""
    return max(n for n in SENDERS if _run("lossy", BURST, n).dropped == 0)


def lossy_slowdown() -> float:
    """Lossy completion time over PFC's, ``FOCUS_SENDERS`` senders."""
    return (
        _run("lossy", BURST, FOCUS_SENDERS).completion_slots
        / _run("pfc", BURST, FOCUS_SENDERS).completion_slots
    )


def completion_figure() -> Figure:
    """Completion time of the incast burst against the number of senders."""
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ideal = [n * BURST.packets_per_sender * _slot_us() for n in SENDERS]
    ax.plot(SENDERS, ideal, "k:", label="bytes / link rate")
    for mode in MODES:
        t = [_run(mode, BURST, n).completion_slots * _slot_us() for n in SENDERS]
        ax.plot(SENDERS, t, "o-", color=_COLOR[mode], label=_LABEL[mode])
    ax.set(
        xscale="log", yscale="log", xlabel="senders N", ylabel="completion time (µs)"
    )
    ax.set_xticks(SENDERS, [str(n) for n in SENDERS])
    ax.minorticks_off()
    ax.legend()
    return fig


# PFC

VICTIM_SENDERS = (2, 4, 8, 16, 32)  # the x axis of the victim figure


def _gbits(packets_per_slot: float) -> float:  # packets per slot -> Gb/s
    return packets_per_slot * LINK_GBITS


def victim_offered_gbits() -> float:
    """What the victim flow offers to its idle receiver, Gb/s."""
    return _gbits(STEADY.victim_rate)


def victim_pfc_gbits() -> float:
    """The victim's throughput under PFC with ``FOCUS_SENDERS`` senders, Gb/s."""
    return _gbits(_run("pfc", STEADY, FOCUS_SENDERS).victim_throughput)


def victim_figure() -> Figure:
    """The victim flow's throughput against the number of incast senders."""
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ax.axhline(victim_offered_gbits(), color="k", ls=":", label="offered")
    ax.plot(
        VICTIM_SENDERS,
        [_gbits(1 / n) for n in VICTIM_SENDERS],
        "--",
        color="grey",
        label="fair share of the congested port",
    )
    for mode in MODES:
        v = [_gbits(_run(mode, STEADY, n).victim_throughput) for n in VICTIM_SENDERS]
        ax.plot(VICTIM_SENDERS, v, "o-", color=_COLOR[mode], label=_LABEL[mode])
    ax.set(xscale="log", xlabel="senders N", ylabel="victim throughput (Gb/s)")
    ax.set_xticks(VICTIM_SENDERS, [str(n) for n in VICTIM_SENDERS], minor=False)
    ax.minorticks_off()
    ax.set_ylim(0, LINK_GBITS * 0.6)
    ax.legend(fontsize="small")
    return fig


# ECN and DCQCN


_ZOOM_SLOTS = 48  # the frames' close-up: the burst's first slots


def _window() -> int:  # slots the whole-burst views show: twice PFC's burst
    return 2 * _run("pfc", STEADY, FOCUS_SENDERS).completion_slots


def _draw_queue(
    ax: Axes, modes: tuple[str, ...], upto: int, fontsize: float | str
) -> None:
    """Port R's depth over the first ``upto`` slots of each mode's long burst.

    With one mode, its events too: drops (lossy) at the buffer's line, slots with
    a paused link (PFC) as a band at the top, ECN marks at the threshold.
    """
    us = _slot_us()
    for mode in modes:
        r = _run(mode, STEADY, FOCUS_SENDERS)
        trace = r.queue_trace[:upto]
        x = [i * us for i in range(len(trace))]
        ax.plot(x, trace, color=_COLOR[mode], label=_LABEL[mode], lw=1)
        if len(modes) > 1:
            continue
        events = (
            (r.drop_trace, STEADY.buffer_packets, "x", "tab:red", "dropped"),
            (r.pause_trace, STEADY.buffer_packets + 4, "|", "tab:blue", "paused"),
            (r.mark_trace, STEADY.ecn_threshold, ".", "tab:green", "ECN-marked"),
        )
        for counts, y, marker, color, label in events:
            at = [i * us for i, n in enumerate(counts[:upto]) if n]
            if at:
                ax.scatter(at, [y] * len(at), marker=marker, color=color, label=label)
    ax.axhline(STEADY.buffer_packets, color="tab:red", ls="--", lw=1, label="buffer")
    ax.axhline(STEADY.ecn_threshold, color="k", ls=":", label="ECN threshold")
    ax.set_xlim(0, upto * us)
    ax.set_ylim(0, STEADY.buffer_packets + 8)
    ax.set_xlabel("time (µs)", fontsize=fontsize)
    ax.set_ylabel("queue at the receiver's port (packets)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ax.legend(fontsize=fontsize, loc="center right")


def queue_figure() -> Figure:
    """Depth of the receiver's switch port over time, ``FOCUS_SENDERS`` senders."""
    fig = Figure(figsize=(6.5, 3.4), layout="constrained")
    _draw_queue(fig.add_subplot(), MODES, _window(), "small")
    return fig


def incast_frames() -> list[Figure]:
    """The burst's first slots on each network, then ECN's and all three's whole run.

    Lossy: the queue fills and drops; PFC: it fills and pauses; ECN: marks from
    the first slot, pauses until the rate cuts arrive; then the whole burst.
    """
    views = [((mode,), _ZOOM_SLOTS) for mode in MODES]
    views += [(("ecn",), _window()), (MODES, _window())]
    frames = []
    for modes, upto in views:
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_queue(fig.add_subplot(), modes, upto, 14)
        frames.append(fig)
    return frames


def _mean_queue(mode: str) -> float:  # packets, ``FOCUS_SENDERS`` long bursts
    trace = _run(mode, STEADY, FOCUS_SENDERS).queue_trace
    return sum(trace) / len(trace)


def ecn_queue_over_pfc() -> float:
    """ECN's mean queue as a fraction of PFC's, ``FOCUS_SENDERS`` senders."""
    return _mean_queue("ecn") / _mean_queue("pfc")


def tradeoff_table() -> Table:
    """The three networks on ``FOCUS_SENDERS`` long bursts and a victim: their costs."""
    rows = []
    for mode in MODES:
        r = _run(mode, STEADY, FOCUS_SENDERS)
        rows.append(
            [
                _LABEL[mode],
                round(r.completion_slots * _slot_us()),
                r.dropped,
                round(_mean_queue(mode) * PACKET_BYTES / 1024),
                round(
                    100 * r.pause_slots / (r.completion_slots * (STEADY.senders + 2)), 1
                ),
                round(_gbits(r.victim_throughput)),
            ]
        )
    return Table(
        [
            "network",
            "completion (µs)",
            "drops",
            "mean queue (KiB)",
            "links paused (%)",
            "victim (Gb/s)",
        ],
        rows,
        note="Simulated by aiinfra.comm.incast; links paused: share of link-slots.",
        stamp="{senders} senders x {packets} packets of {size} B at {gbits} Gb/s, "
        "{buffer}-packet ports",
        fields={
            "senders": STEADY.senders,
            "packets": STEADY.packets_per_sender,
            "size": PACKET_BYTES,
            "gbits": LINK_GBITS,
            "buffer": STEADY.buffer_packets,
        },
    )


# Scale-up and scale-out


def scale_table() -> Table:
    """Scale-up (NVLink) against scale-out (the GPU's NIC), per GPU and direction."""
    rows = []
    for key, gpu in GPUS.items():
        up = gpu.scale_up_bandwidth / 2 / 1e9  # both directions -> one, GB/s
        out = NIC_GBITS_PER_GPU[key] / 8  # Gb/s -> GB/s
        rows.append([gpu.name, gpu.scale_up, up, NIC_GBITS_PER_GPU[key], out, up / out])
    return Table(
        [
            "GPU",
            "scale-up link",
            "scale-up (GB/s)",
            "NIC (Gb/s)",
            "NIC (GB/s)",
            "ratio",
        ],
        rows,
        note="Per GPU, one direction. Datasheets; NICs of the DGX systems.",
    )


def h100_scale_ratio() -> float:
    """How many times its NIC's bandwidth an H100 has over NVLink."""
    gpu = GPUS["H100"]
    return gpu.scale_up_bandwidth / 2 / (NIC_GBITS_PER_GPU["H100"] / 8 * 1e9)
