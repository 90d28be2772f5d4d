"""What ``docs/communication/trees.rst`` shows: its values, tables, figures.

Its numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import figures, nccl_model, steps
from aiinfra.report import Table


def binomial_broadcast_figure() -> Figure:
    """The binomial-tree broadcast from rank 0 on eight ranks, round by round."""
    return steps.binomial_broadcast_figure(p=8, root=0)


def binomial_broadcast_frames() -> list[Figure]:
    """The binomial-tree broadcast from rank 0 on eight ranks, one frame per round."""
    return steps.binomial_broadcast_frames(p=8, root=0)


def hierarchical_figure() -> Figure:
    """The hierarchical all-reduce on two nodes of four ranks, phase by phase."""
    return steps.hierarchical_figure(num_nodes=2, local_size=4)


def hierarchical_frames() -> list[Figure]:
    """The hierarchical all-reduce on two nodes of four ranks, one frame per phase."""
    return steps.hierarchical_frames(num_nodes=2, local_size=4)


def hierarchy_table() -> Table:
    """Flat rings on 1 and 8 NICs against hierarchy, 2 to 64 nodes of 8 (ib400)."""
    return nccl_model.hierarchy_table(nodes=(2, 4, 16, 64), local_size=8, rails=8)


def hierarchy_figure() -> Figure:
    """All-reduce time against size, 8 nodes of 8: rings on 1 and 8 NICs, hierarchy."""
    return figures.hierarchy_figure(nodes=8, local_size=8, rails=8)


def hierarchical_faster_below_2_nodes() -> str:
    """Size below which hierarchy beats the 8-rail ring on 2 nodes of 8."""
    return hierarchy_table().rows[0][-1]


def hierarchical_faster_below_64_nodes() -> str:
    """Size below which hierarchy beats the 8-rail ring on 64 nodes of 8."""
    return hierarchy_table().rows[-1][-1]
