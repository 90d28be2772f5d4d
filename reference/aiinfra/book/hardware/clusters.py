"""What ``docs/hardware/clusters.rst`` shows: its values, tables, figures.

Every number is computed by the sizing code of :mod:`aiinfra.hardware.topology` and
:mod:`aiinfra.hardware.rails` (closed forms that the tests hold to wired graphs and
max-flows); nothing here is measured. The example cluster has the size of Llama 3
405B's job (:data:`aiinfra.hardware.reliability.LLAMA3_405B`).
"""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra.hardware import ecmp, rails, topology
from aiinfra.hardware.reliability import LLAMA3_405B
from aiinfra.report import Table

#: Ports per switch of the drawn fat-tree (Al-Fares et al.'s own example).
DRAWN_K = 4
#: Ports per switch of the example cluster (a 64-port 400 Gb/s switch).
RADIX = 64
#: GPUs of the example cluster: Llama 3 405B's job.
CLUSTER_GPUS = LLAMA3_405B.gpus
#: All-to-all group of the scale-up comparison (expert parallelism over 64 GPUs).
EP_GROUP = 64
#: Bytes each GPU sends in that all-to-all (256 MiB).
EP_BYTES = 256 * 2**20

_TIER_Y = {"host": 0, "edge": 1, "agg": 2, "core": 3}
_TIER_NAME = {"host": "hosts", "edge": "edge", "agg": "aggregation", "core": "core"}
_TIER_COLOR = {"host": "0.55", "edge": "C0", "agg": "C2", "core": "C3"}


# fat-tree


def _fat_tree_positions(k: int) -> dict[topology.Node, tuple[float, float]]:
    """Layered layout: hosts in a row, each switch centred over what it serves."""
    half = k // 2
    pos: dict[topology.Node, tuple[float, float]] = {}
    for p in range(k):
        for e in range(half):
            xs = [(p * half + e) * half + h for h in range(half)]
            for h, x in enumerate(xs):
                pos[("host", p, e, h)] = (x, 0)
            pos[("edge", p, e)] = (float(np.mean(xs)), 1)
        for a in range(half):
            pos[("agg", p, a)] = (pos[("edge", p, a)][0], 2)
    width = k * half * half - 1
    cores = [(a, c) for a in range(half) for c in range(half)]
    for i, (a, c) in enumerate(cores):
        pos[("core", a, c)] = (width * (i + 0.5) / len(cores) - 0.5, 3)
    return pos


def _paths(k: int, src: topology.Node, dst: topology.Node) -> set:
    """Links on the shortest paths from host ``src`` to host ``dst`` of another pod."""
    used = {(src, ("edge", *src[1:3])), (dst, ("edge", *dst[1:3]))}
    for a in range(k // 2):
        for end in (src, dst):
            used.add((("edge", *end[1:3]), ("agg", end[1], a)))
            used |= {(("agg", end[1], a), ("core", a, c)) for c in range(k // 2)}
    return used


#: Tiers the fat-tree is built from, bottom up: the frames add one at a time.
_BUILD = ("edge", "agg", "core")


def _draw_fat_tree(ax: Axes, tiers: int, paths: bool, fontsize: float) -> None:
    """Draw the k = 4 fat-tree up to its ``tiers``-th switch tier, paths optional."""
    k = DRAWN_K
    pos = _fat_tree_positions(k)
    src, dst = ("host", 0, 0, 0), ("host", k - 1, k // 2 - 1, k // 2 - 1)
    hot = _paths(k, src, dst) if paths else set()
    shown = {"host", *_BUILD[:tiers]}
    for u, v in topology.fat_tree_links(k):  # each link joins v's tier from below
        if v[0] not in shown:
            continue
        (x0, y0), (x1, y1) = pos[u], pos[v]
        on = (u, v) in hot
        ax.plot(
            [x0, x1],
            [y0, y1],
            color="C1" if on else "0.7",
            linewidth=2.4 if on else 0.9,
            zorder=2 if on else 1,
        )
    for tier, y in _TIER_Y.items():
        nodes = [n for n in pos if n[0] == tier and tier in shown]
        ax.scatter(
            [pos[n][0] for n in nodes],
            [y] * len(nodes),
            s=90 if tier != "host" else 40,
            marker="s" if tier != "host" else "o",
            color=_TIER_COLOR[tier],
            zorder=3,
        )
    if tiers >= 2:
        for p in range(k):  # a dashed box around each pod
            x0, width = p * (k // 2) ** 2 - 0.5, (k // 2) ** 2
            box = Rectangle((x0, -0.3), width, 2.6, ls="--", ec="0.4", fc="none")
            ax.add_patch(box)
    ax.set_yticks(list(_TIER_Y.values()), [_TIER_NAME[t] for t in _TIER_Y])
    ax.set_xticks([])
    ax.set_ylim(-0.45, 3.45)
    ax.set_xlim(-1, k * (k // 2) ** 2)
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(left=False, labelsize=fontsize)


def fat_tree_figure() -> Figure:
    """The k = 4 fat-tree, with the shortest paths between two hosts highlighted."""
    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    _draw_fat_tree(fig.subplots(), len(_BUILD), True, 10)
    return fig


def fat_tree_frames() -> list[Figure]:
    """The k = 4 fat-tree built tier by tier, then its paths between two pods."""
    frames = []
    for tiers, paths in [(t, False) for t in range(1, len(_BUILD) + 1)] + [
        (len(_BUILD), True)
    ]:
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_fat_tree(fig.subplots(), tiers, paths, 16)
        frames.append(fig)
    return frames


def fat_tree_paths() -> int:
    """Shortest paths between two hosts in different pods of the drawn fat-tree."""
    return (DRAWN_K // 2) ** 2


def fat_tree_value(k: int, name: str) -> float:
    """A count of :func:`~aiinfra.hardware.topology.fat_tree` with ``k`` ports."""
    return getattr(topology.fat_tree(k), name)


def _tbps(gbps: float) -> float:
    """Gb/s as Tb/s: one decimal below 100 Tb/s, whole above."""
    tbps = gbps / 1e3
    return round(tbps, 1) if tbps < 100 else round(tbps)


def fat_tree_table() -> Table:
    """Sizes of the three-tier fat-tree against the switches' radix."""
    rows = []
    for k in (4, 16, 32, 48, 64, 128):
        ft = topology.fat_tree(k)
        rows.append([k, ft.hosts, ft.switches, ft.links, _tbps(ft.bisection_gbps)])
    return Table(
        ["radix k", "hosts", "switches", "links", "bisection (Tb/s)"],
        rows,
        note="Three tiers of identical k-port switches, 400 Gb/s links (Al-Fares "
        "et al. 2008): k^3/4 hosts, 5k^2/4 switches, 3k^3/4 links; bisection bandwidth "
        "in one direction between two halves of the pods.",
    )


# leaf-spine


def leaf_spine_table() -> Table:
    """Hosts and bisection of a full leaf-spine as leaves trade uplinks for hosts."""
    rows = []
    for down in (32, 40, 48):
        ls = topology.leaf_spine(RADIX, down, RADIX - down)
        per_host = ls.bisection_gbps / (ls.hosts / 2)
        rows.append(
            [
                f"{down}:{RADIX - down}",
                round(ls.oversubscription, 2),
                ls.hosts,
                ls.leaves + ls.spines,
                round(per_host),
            ]
        )
    return Table(
        ["down:up ports", "oversubscription", "hosts", "switches", "Gb/s per host"],
        rows,
        note="Two tiers of 64-port switches, 64 leaves, 400 Gb/s links; Gb/s per "
        "host: the bisection bandwidth shared by the hosts of one half.",
    )


def leaf_spine_hosts(down: int) -> int:
    """Hosts of the full 64-port leaf-spine with ``down`` host ports per leaf."""
    return topology.leaf_spine(RADIX, down, RADIX - down).hosts


# rails


def rail_value(name: str, gpus: int = CLUSTER_GPUS, radix: int = RADIX) -> float:
    """A count of :func:`~aiinfra.hardware.rails.rail_cluster` (8 GPUs a node)."""
    return getattr(rails.rail_cluster(gpus, radix=radix), name)


def rail_max_gpus(tiers: int, radix: int = RADIX) -> int:
    """The most GPUs a rail-optimised network of ``tiers`` tiers holds."""
    d = radix // 2
    if tiers == 2:  # radix leaves of d NICs each
        return rails.rail_cluster(radix * d, radix=radix).max_gpus
    pod = (d // 8) * d * 8  # whole nodes of d // 8 leaves per rail
    return rails.rail_cluster(radix * pod, radix=radix).max_gpus


def rail_table() -> Table:
    """Tiers, switches, links and optics of rail-optimised clusters (64 ports)."""
    rows = []
    for gpus in (1024, 2048, 4096, CLUSTER_GPUS, 32_768, 65_536):
        c = rails.rail_cluster(gpus, radix=RADIX)
        rows.append(
            [gpus, c.tiers, c.switches, c.links, c.optics, round(c.optics / gpus, 2)]
        )
    return Table(
        ["GPUs", "tiers", "switches", "links", "optics", "optics per GPU"],
        rows,
        note="Rail-optimised, non-blocking, 8 GPUs and 8 NICs of 400 Gb/s per node, "
        "64-port switches; optics: two transceivers per link, the cost proxy.",
    )


#: Oversubscriptions of the core tier the table compares (1: non-blocking).
OVERSUBSCRIPTIONS = (1, 2, 4, 8)


def oversubscribed_table() -> Table:
    """Llama 3-sized clusters with the core tier oversubscribed 1:r above its pods."""
    rows = []
    for r in OVERSUBSCRIPTIONS:
        c = rails.rail_cluster(CLUSTER_GPUS, radix=RADIX, oversubscription=r)
        rows.append(
            [
                f"1:{r}",
                c.switches,
                c.optics,
                round(c.optics / c.gpus, 2),
                round(c.cross_pod_per_gpu_gbps),
                _tbps(c.bisection_gbps),
            ]
        )
    return Table(
        [
            "core tier",
            "switches",
            "optics",
            "optics per GPU",
            "Gb/s per GPU between pods",
            "bisection (Tb/s)",
        ],
        rows,
        note="Rail-optimised, 8 GPUs and 8 NICs of 400 Gb/s per node, 64-port "
        "switches; pods non-blocking inside, their aggregation switches wired to the "
        "core with one uplink per r ports down; bisection between the two halves of "
        "the nodes, by max-flow.",
        stamp="{gpus} GPUs in pods of {pod} GPUs",
        fields={
            "gpus": f"{CLUSTER_GPUS:,}",
            "pod": f"{pod_gpus():,}",
        },
    )


def pod_gpus() -> int:
    """GPUs in one non-blocking pod of the 64-port example cluster."""
    return rails.rail_cluster(CLUSTER_GPUS, radix=RADIX).nodes_per_pod * 8


def optics_saved_pct(r: int) -> float:
    """Optics an oversubscription 1:r of the core saves on the example, percent."""
    full = rails.rail_cluster(CLUSTER_GPUS, radix=RADIX).optics
    return 100 * (
        1
        - rails.rail_cluster(CLUSTER_GPUS, radix=RADIX, oversubscription=r).optics
        / full
    )


def switches_figure() -> Figure:
    """Switches of a rail-optimised cluster against its GPUs, for three radices."""
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    for radix, color in ((32, "C0"), (64, "C1"), (128, "C2")):
        top = rail_max_gpus(3, radix)
        gpus = np.unique(np.geomspace(8, top, 200).astype(int))
        clusters = [rails.rail_cluster(int(g), radix=radix) for g in gpus]
        ax.step(
            gpus,
            [c.switches for c in clusters],
            where="post",
            color=color,
            label=f"radix {radix}",
        )
        two = rail_max_gpus(2, radix)
        ax.axvline(two, color=color, linestyle=":", linewidth=1)
    ax.axvline(CLUSTER_GPUS, color="0.3", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("switches")
    ax.legend(loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    return fig


# scale-up


def scale_up_table() -> Table:
    """HGX H100 against GB200 NVL72: NVLink domain, links, a 64-GPU all-to-all."""
    rows = []
    for d in (rails.HGX_H100, rails.GB200_NVL72):
        ms = rails.all_to_all_seconds(d, EP_GROUP, EP_BYTES) * 1e3
        off = (EP_GROUP - min(EP_GROUP, d.gpus)) / (EP_GROUP - 1)  # peers outside
        nv, nic = d.nvlink_gbps, d.nic_gbps
        links = [round(nv / 8), round(nic / 8), round(nv / nic)]  # GB/s, GB/s, ratio
        rows.append([d.name, d.gpus, *links, round(100 * off), round(ms, 2)])
    return Table(
        [
            "system",
            "GPUs per NVLink domain",
            "NVLink (GB/s)",
            "NIC (GB/s)",
            "NVLink / NIC",
            "all-to-all via NIC (%)",
            "all-to-all (ms)",
        ],
        rows,
        note="Per GPU and direction (NVIDIA datasheets). All-to-all: 64 GPUs, 256 "
        "MiB sent by each, bandwidth term only, non-blocking fabric.",
    )


def all_to_all_ratio() -> float:
    """How many times longer the 64-GPU all-to-all takes on HGX H100 than on NVL72."""
    slow = rails.all_to_all_seconds(rails.HGX_H100, EP_GROUP, EP_BYTES)
    return slow / rails.all_to_all_seconds(rails.GB200_NVL72, EP_GROUP, EP_BYTES)


def domain_gpus(system: str) -> int:
    """GPUs in one NVLink domain of ``"HGX H100"`` or ``"GB200 NVL72"``."""
    return {d.name: d.gpus for d in (rails.HGX_H100, rails.GB200_NVL72)}[system]


# ECMP

#: Uplinks and flows of the drawn ECMP example: eight flows onto eight spines.
ECMP_LINKS = 8
#: The hash of the drawn example (a seed whose collisions are typical).
ECMP_SEED = 4
#: Queue pairs per connection the efficiency curve runs through.
ECMP_QUEUE_PAIRS = (1, 2, 4, 8, 16)


def _ecmp_uplinks() -> list[int]:
    return ecmp.hash_flows(ECMP_LINKS, ECMP_LINKS, ECMP_SEED)


def _draw_hash(ax: Axes, placed: int, fontsize: float) -> None:
    """The first ``placed`` flows of the example stacked on the uplinks they hash to."""
    uplinks = _ecmp_uplinks()
    height = [0] * ECMP_LINKS
    for flow, link in enumerate(uplinks[:placed]):
        ax.bar(link, 1, bottom=height[link], color=f"C{flow % 10}", edgecolor="white")
        ax.text(
            link,
            height[link] + 0.5,
            str(flow),
            ha="center",
            va="center",
            color="white",
            fontsize=fontsize,
        )
        height[link] += 1
    ax.axhline(1, color="0.3", linestyle="--", linewidth=1)
    ax.set_xticks(range(ECMP_LINKS))
    ax.set_xlim(-0.6, ECMP_LINKS - 0.4)
    ax.set_ylim(0, max(3, max(ecmp.loads(uplinks, ECMP_LINKS))) + 0.5)
    ax.set_xlabel("uplink", fontsize=fontsize)
    ax.set_ylabel("flows", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)


def _draw_efficiency(ax: Axes, fontsize: float) -> None:
    """Share of the bandwidth eight connections get against their queue pairs."""
    effs = [ecmp_efficiency_pct(q) for q in ECMP_QUEUE_PAIRS]
    ax.plot(ECMP_QUEUE_PAIRS, effs, "o-", color="C0", label="ECMP")
    ax.axhline(100, color="C2", linestyle="--", label="adaptive routing (ideal)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ECMP_QUEUE_PAIRS, [str(q) for q in ECMP_QUEUE_PAIRS])
    ax.set_ylim(0, 110)
    ax.set_xlabel("queue pairs per connection", fontsize=fontsize)
    ax.set_ylabel("bandwidth the flows get (%)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ax.legend(loc="lower right", fontsize=fontsize * 0.9)
    ax.grid(True, alpha=0.3)


def ecmp_figure() -> Figure:
    """One hash of eight flows onto eight uplinks; the share flows get against QPs."""
    fig = Figure(figsize=(8.4, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    _draw_hash(left, ECMP_LINKS, 9)
    left.set_title("one hash: eight flows, eight uplinks", fontsize=10)
    _draw_efficiency(right, 9)
    return fig


def ecmp_frames() -> list[Figure]:
    """The example's flows hashed onto the uplinks one at a time, then its curve.

    The last frame puts the hash beside the share of the bandwidth the flows get
    against the queue pairs per connection, the book figure at slide size.
    """
    frames = []
    for placed in range(ECMP_LINKS + 1):
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_hash(fig.subplots(), placed, 16)
        frames.append(fig)
    fig = Figure(figsize=(10, 5), layout="constrained")
    left, right = fig.subplots(1, 2)
    _draw_hash(left, ECMP_LINKS, 14)
    _draw_efficiency(right, 14)
    frames.append(fig)
    return frames


def ecmp_busiest() -> int:
    """Flows on the busiest uplink of the drawn hash."""
    return max(ecmp.loads(_ecmp_uplinks(), ECMP_LINKS))


def ecmp_idle() -> int:
    """Uplinks the drawn hash leaves idle."""
    return ecmp.loads(_ecmp_uplinks(), ECMP_LINKS).count(0)


def ecmp_expected_max() -> float:
    """Expected flows on the busiest of eight uplinks carrying eight flows."""
    return ecmp.expected_max_load(ECMP_LINKS, ECMP_LINKS)


def ecmp_efficiency_pct(queue_pairs: int) -> float:
    """Bandwidth share of 8 connections on 8 uplinks, ``queue_pairs`` QPs each, %."""
    return 100 * ecmp.ecmp_efficiency(ECMP_LINKS, ECMP_LINKS, queue_pairs)
