"""What ``docs/communication/ring.rst`` shows: its values and figures.

Its numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import cost, nccl_model, steps

from ._common import BYTES


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
    return cost.ring_all_reduce_time(1.0, 8, BYTES)


def in_network_bytes_8_ranks() -> float:
    """Bytes per rank of an in-network all-reduce on 8 ranks, in units of n."""
    return nccl_model.in_network_all_reduce_time(1.0, 8, BYTES)
