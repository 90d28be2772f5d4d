"""Values, tables and figures of the pages on collectives, ring, doubling, trees.

Their numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost, figures, nccl_model, steps
from aiinfra.report import Table

_BYTES = cost.LinkModel(alpha=0.0, beta=1.0, name="bytes")  # the time is bytes sent


# collectives.rst


def collectives_figure() -> Figure:
    """The six collectives on four ranks: buffers before and after."""
    return figures.collectives_figure(p=4)


# ring.rst


def ring_schedule_figure() -> Figure:
    """The ring all-reduce on four ranks, step by step."""
    return steps.ring_schedule_figure(p=4)


def ring_schedule_frames() -> list[Figure]:
    """The ring all-reduce on four ranks, one frame per step."""
    return steps.ring_schedule_frames(p=4)


def ring_latency_ms_1024_ranks() -> float:
    """Pure latency of a ring all-reduce on 1024 ranks of the ib400 link, ms."""
    return cost.ring_all_reduce_time(0, 1024, "ib400") * 1e3


def ib400_alpha_us() -> float:
    """The per-message latency alpha of the ib400 link, microseconds."""
    return cost.LINKS["ib400"].alpha * 1e6


def ring_bytes_8_ranks() -> float:
    """Bytes per rank of a ring all-reduce on 8 ranks, in units of n."""
    return cost.ring_all_reduce_time(1.0, 8, _BYTES)


def in_network_bytes_8_ranks() -> float:
    """Bytes per rank of an in-network all-reduce on 8 ranks, in units of n."""
    return nccl_model.in_network_all_reduce_time(1.0, 8, _BYTES)


# doubling.rst


def recursive_doubling_figure() -> Figure:
    """Recursive doubling on eight ranks: whose vectors each rank has summed."""
    return steps.recursive_doubling_figure(p=8)


def recursive_doubling_frames() -> list[Figure]:
    """Recursive doubling on eight ranks, one frame per step."""
    return steps.recursive_doubling_frames(p=8)


def halving_doubling_figure() -> Figure:
    """Rabenseifner's halving-doubling all-reduce on eight ranks, step by step."""
    return steps.halving_doubling_figure(p=8)


def halving_doubling_frames() -> list[Figure]:
    """Rabenseifner's halving-doubling all-reduce on eight ranks, one frame per step."""
    return steps.halving_doubling_frames(p=8)


def rabenseifner_bytes_6_ranks() -> float:
    """Bytes per rank of Rabenseifner's all-reduce on 6 ranks (folded), units of n."""
    return cost.rabenseifner_all_reduce_time(1.0, 6, _BYTES)


def ring_bytes_6_ranks() -> float:
    """Bytes per rank of the ring all-reduce on 6 ranks, in units of n."""
    return cost.ring_all_reduce_time(1.0, 6, _BYTES)


def rabenseifner_over_ring_bytes_6_ranks() -> float:
    """How many times the ring's bytes the folded Rabenseifner sends on 6 ranks."""
    return rabenseifner_bytes_6_ranks() / ring_bytes_6_ranks()


def scaling_figure() -> Figure:
    """All-reduce time against ranks for the three algorithms, at several sizes."""
    return figures.scaling_figure()


# trees.rst


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
