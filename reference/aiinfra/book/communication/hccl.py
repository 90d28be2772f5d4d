"""What ``docs/communication/hccl.rst`` shows: HCCL's algorithms, priced and drawn.

Its times use the illustrative links of :data:`aiinfra.comm.cost.LINKS`, not an
Ascend measurement: no NPU ran any of this.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost
from aiinfra.comm.hccl import algo_env, figures
from aiinfra.comm.hccl import cost as hccl_cost
from aiinfra.comm.hccl.schedules import step_count
from aiinfra.report import Table

from ._common import BYTES, MIB

#: The book's implementation of each of HCCL's all-reduce algorithms.
IMPLEMENTATIONS = {
    "ring": "ring_all_reduce",
    "Mesh": "mesh_all_reduce",
    "H-D_R": "rabenseifner_all_reduce",
    "NHR": "nhr_all_reduce",
    "NB": "nb_all_reduce",
}


def nhr_schedule_figure() -> Figure:
    """NHR's all-reduce on five ranks, every step."""
    return figures.nhr_schedule_figure(p=5)


def nhr_schedule_frames() -> list[Figure]:
    """NHR's all-reduce on five ranks, one frame per step."""
    return figures.nhr_schedule_frames(p=5)


def nhr_steps_5_ranks() -> int:
    """Steps of NHR's (and NB's) reduce-scatter on five ranks: ceil(lg 5)."""
    return step_count(5)


def algorithm_table(p: int = 6, n: float = 16 * MIB, link: str = "ib400") -> Table:
    """Each all-reduce's messages, bytes and modelled time at p ranks, n bytes."""
    rows = []
    for name, f in hccl_cost.ALL_REDUCE.items():
        msgs = f(0.0, p, cost.LinkModel(1.0, 0.0))  # the alpha coefficient
        sent = f(1.0, p, BYTES)  # bytes sent per rank, in units of n
        rows.append([name, IMPLEMENTATIONS[name], f"{msgs:g}", f"{sent:.3g}"])
        rows[-1].append(f"{f(n, p, link) * 1e6:.0f}")
    return Table(
        ["HCCL_ALGO", "implementation", "messages", "bytes sent (x n)", "time (us)"],
        rows,
        words=(),
        note="Messages and bytes per rank from HCCL's formulas; Mesh assumes p - 1 "
        "links used at once, the others one link each.",
        stamp="p = {p}, n = {n}, link {link}",
        fields={"p": p, "n": cost.format_bytes(n), "link": link},
    )


def ring_hdr_crossover_6_ranks() -> float:
    """Size in bytes above which the ring beats H-D_R on six ranks over ib400."""
    return hccl_cost.crossover_size_between("ring", "H-D_R", 6, "ib400")


def hdr_over_nhr_bytes_6_ranks() -> float:
    """How many times NHR's bytes folded H-D_R sends on six ranks."""
    hdr = hccl_cost.ALL_REDUCE["H-D_R"](1.0, 6, BYTES)
    return hdr / hccl_cost.ALL_REDUCE["NHR"](1.0, 6, BYTES)


def crossover_figure() -> Figure:
    """Ring, H-D_R and NHR all-reduce times on six ranks over ib400."""
    return figures.crossover_figure(p=6, link="ib400")


def default_table() -> Table:
    """HCCL's documented default between servers of the Atlas training series."""
    rows = [[s, algo_env.documented_default(s, "atlas-training")] for s in range(1, 9)]
    return Table(
        ["servers", "default algorithm"],
        rows,
        words=(),
        note="Atlas training series, HCCL_ALGO unset (CANN 8.0 documentation). "
        "Atlas A2: chosen inside HCCL by product, data size and server count; the "
        "rule is not published.",
    )
