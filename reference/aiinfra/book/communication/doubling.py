"""What ``docs/communication/doubling.rst`` shows: its values and figures.

Its numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost, figures, steps

from ._common import BYTES


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
    return cost.rabenseifner_all_reduce_time(1.0, 6, BYTES)


def ring_bytes_6_ranks() -> float:
    """Bytes per rank of the ring all-reduce on 6 ranks, in units of n."""
    return cost.ring_all_reduce_time(1.0, 6, BYTES)


def rabenseifner_over_ring_bytes_6_ranks() -> float:
    """How many times the ring's bytes the folded Rabenseifner sends on 6 ranks."""
    return rabenseifner_bytes_6_ranks() / ring_bytes_6_ranks()


def scaling_figure() -> Figure:
    """All-reduce time against ranks for the three algorithms, at several sizes."""
    return figures.scaling_figure()
