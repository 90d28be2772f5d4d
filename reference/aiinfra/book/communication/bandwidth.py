"""What ``docs/communication/bandwidth.rst`` shows: its values, tables, figures.

The measured numbers read the ``collectives`` and ``ring`` results
(:mod:`aiinfra.results`).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.comm import bench, cost, figures, paired
from aiinfra.comm import results as busbw
from aiinfra.report import Table

from ._common import MIB


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
    """The pipelined ring's all-reduce busbw over gloo's: median of paired runs."""
    return paired.paired_ratio("ring_pipelined")


def textbook_ring_over_torch_busbw() -> float:
    """The textbook ring's all-reduce busbw over gloo's: median of paired runs."""
    return paired.paired_ratio("ring")


def paired_run_count() -> int:
    """How many paired runs the ring comparison took."""
    return len(paired.paired_runs()["torch"])


def ring_paired_size() -> str:
    """The message size of the paired ring comparison, e.g. ``'16 MiB'``."""
    return cost.format_bytes(results.load("ring")["rows"][0]["size"])


def ring_paired_stamp(field: str) -> object:
    """A field of the paired ring comparison's machine stamp (world_size, cpu_count)."""
    return results.load("ring")["stamp"][field]


def pipeline_segments() -> int:
    """Pieces per chunk of the pipelined ring in the benchmark."""
    return bench.PIPELINE_SEGMENTS


def ring_paired_figure() -> Figure:
    """Busbw of each paired run: textbook ring, pipelined ring, gloo (measured)."""
    return paired.paired_runs_figure()
