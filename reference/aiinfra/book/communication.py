"""Every value, table and figure of the communication chapter (``docs/communication``).

The cost-model numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`;
the measured ones read the ``collectives`` results (:mod:`aiinfra.results`).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost, figures
from aiinfra.comm import results as busbw
from aiinfra.report import Table

MIB = 2**20
RATIO_SIZE = 16 * MIB  # the size at which the page compares our ring with torch's


# collectives.rst


def collectives_figure() -> Figure:
    """The six collectives on four ranks: buffers before and after."""
    return figures.collectives_figure(p=4)


# ring.rst


def ring_schedule_figure() -> Figure:
    """The ring all-reduce on four ranks, step by step."""
    return figures.ring_schedule_figure(p=4)


def ring_latency_ms_1024_ranks() -> float:
    """Pure latency of a ring all-reduce on 1024 ranks of the ib400 link, ms."""
    return cost.ring_all_reduce_time(0, 1024, "ib400") * 1e3


def ib400_alpha_us() -> float:
    """The per-message latency alpha of the ib400 link, microseconds."""
    return cost.LINKS["ib400"].alpha * 1e6


# doubling.rst


def scaling_figure() -> Figure:
    """All-reduce time against ranks for the three algorithms, at several sizes."""
    return figures.scaling_figure()


# cost_model.rst


def cost_formula_table() -> Table:
    """Every algorithm's alpha and beta terms at 8 ranks, 16 MiB, NVLink."""
    return cost.cost_formula_table(p=8, n=16 * MIB, link="nvlink")


def crossover_figure() -> Figure:
    """Time against size at 16 ranks of ib400: where the algorithms cross."""
    return figures.crossover_figure(p=16, link="ib400")


def crossover_table() -> Table:
    """Sizes below which recursive doubling wins, per rank count, NVLink."""
    return cost.crossover_table(link="nvlink")


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


# bandwidth.rst


def busbw_factor_table() -> Table:
    """Busbw / algbw for each collective and several rank counts (nccl-tests)."""
    return busbw.busbw_factor_table()


def all_reduce_factor_1024_ranks() -> float:
    """The all-reduce bus-bandwidth factor 2(n-1)/n at n = 1024."""
    return busbw.busbw_factor("all_reduce", 1024)


def measured_all_reduce_table() -> Table:
    """The measured all-reduce rows of 1 MiB and more (gloo results)."""
    return busbw.results_table(collective="all_reduce", min_bytes=MIB)


def measured_busbw_figure() -> Figure:
    """Measured busbw against size, every collective and algorithm (gloo)."""
    return figures.results_figure()


def ring_over_torch_busbw() -> float:
    """Our ring's all-reduce busbw over torch.distributed's at 16 MiB (gloo)."""
    return busbw.busbw_ratio("all_reduce", "ring", "torch", RATIO_SIZE)
