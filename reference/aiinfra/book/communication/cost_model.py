"""What ``docs/communication/cost_model.rst`` shows: its values, tables, figures.

Its numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra.comm import cost, figures, nccl_model
from aiinfra.report import Table

from ._common import MIB


def cost_formula_table() -> Table:
    """Every algorithm's alpha and beta terms at 8 ranks, 16 MiB, NVLink."""
    return cost.cost_formula_table(p=8, n=16 * MIB, link="nvlink")


CROSSOVER_RANKS = 16  # p of the crossover figure
CROSSOVER_NODE_RANKS = 8  # ranks per node of its hierarchical algorithm
CROSSOVER_LINK = "ib400"  # its network between nodes


def crossover_figure() -> Figure:
    """Time against size at 16 ranks of ib400: where the algorithms cross."""
    return figures.crossover_figure(
        p=CROSSOVER_RANKS, link=CROSSOVER_LINK, local_size=CROSSOVER_NODE_RANKS
    )


def crossover_link_gbits() -> float:
    """The crossover figure's network bandwidth, Gb/s (1/beta in bits)."""
    return 8 / cost.LINKS[CROSSOVER_LINK].beta / 1e9


def crossover_nodes() -> int:
    """Nodes of the crossover figure's hierarchical algorithm."""
    return CROSSOVER_RANKS // CROSSOVER_NODE_RANKS


def crossover_table() -> Table:
    """Sizes below which recursive doubling wins, per rank count, NVLink."""
    return cost.crossover_table(link="nvlink")


def ring_vs_rabenseifner_table() -> Table:
    """Steps, bytes and crossover of the ring and Rabenseifner, NVLink."""
    table = nccl_model.ring_vs_rabenseifner_table(link="nvlink")
    return replace(table, words=(0, 5))  # 5: "never"


def ring_extra_us_8_ranks() -> float:
    """How much longer the ring takes than Rabenseifner on 8 NVLink ranks, at any n."""
    n = 16 * MIB  # the gap is the same at every size
    ring, rab = cost.ring_all_reduce_time, cost.rabenseifner_all_reduce_time
    return (ring(n, 8, "nvlink") - rab(n, 8, "nvlink")) * 1e6


def ring_faster_above_6_ranks() -> str:
    """Size above which the ring beats the folded Rabenseifner on 6 NVLink ranks."""
    return next(r[-1] for r in ring_vs_rabenseifner_table().rows if r[0] == 6)


def doubling_beats_ring_below() -> str:
    """Size below which recursive doubling beats the ring on 8 NVLink ranks."""
    n = cost.crossover_size(
        "recursive_doubling_all_reduce", "ring_all_reduce", 8, "nvlink"
    )
    return cost.format_bytes(n)


def doubling_beats_rabenseifner_below() -> str:
    """Size below which recursive doubling beats Rabenseifner on 8 NVLink ranks."""
    n = cost.crossover_size(
        "recursive_doubling_all_reduce", "rabenseifner_all_reduce", 8, "nvlink"
    )
    return cost.format_bytes(n)
