"""What ``docs/communication/nccl.rst`` shows: its values, tables, figures.

Its numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost, figures, nccl_model
from aiinfra.report import Table

from ._common import MIB


def double_tree_figure() -> Figure:
    """NCCL's two binary trees over eight ranks."""
    return figures.double_tree_figure(p=8)


def nccl_algorithm_table() -> Table:
    """Ring, double binary tree and in-network all-reduce on 64 ranks of ib400."""
    return nccl_model.nccl_algorithm_table(p=64, sizes=(64 * 2**10, 256 * MIB))


def protocol_table() -> Table:
    """NCCL's protocols and the share of their bytes that is data."""
    return nccl_model.protocol_table()


def tree_beats_ring_below_64_ranks() -> str:
    """Size below which the double binary tree beats the ring on 64 ib400 ranks."""
    n = cost.crossover_size(
        nccl_model.double_binary_tree_all_reduce_time,
        cost.ring_all_reduce_time,
        64,
        "ib400",
    )
    return cost.format_bytes(n)
