"""What ``docs/training/zero.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.memory import figures as memory_figures
from aiinfra.parallel.toy import mlp, regression_batches
from aiinfra.parallel.zero import figures as zero_figures
from aiinfra.parallel.zero import memory as zero_memory
from aiinfra.parallel.zero import results as zero_results
from aiinfra.parallel.zero.compare import MAX_GRAD_NORM, WIDTHS, train_one_process
from aiinfra.parallel.zero.fsdp2_sync import fsdp2_traffic_rows
from aiinfra.report import Table

from .memory import EXAMPLE

ZERO_FIGURE_RANKS = 4  # N_d of the ZeRO stages figure
ZERO_MAX_GRAD_NORM = MAX_GRAD_NORM  # the comparison's clipping threshold


def zero_stages_figure() -> Figure:
    """Bytes per parameter on each rank, DDP and ZeRO stages 1-3."""
    return zero_figures.zero_stage_figure(ZERO_FIGURE_RANKS)


def zero_stages_frames() -> list[Figure]:
    """The same, one frame per stage."""
    return zero_figures.zero_stage_frames(ZERO_FIGURE_RANKS)


def _zero_measurements() -> tuple[dict, ...]:
    """Rank 0's bytes per stage on 4 gloo ranks, from ``aiinfra bench zero``'s file."""
    return tuple(results.load("zero")["memory"])


def zero_parameters() -> int:
    """Parameters of the MLP whose ZeRO memory is measured."""
    return _zero_measurements()[0]["psi"]


def zero_padded_parameters() -> int:
    """The same, padded to whole shards of every unit."""
    return _zero_measurements()[0]["psi_padded"]


def zero_memory_table() -> Table:
    """Model states per rank measured on four gloo ranks, beside the formulas."""
    return zero_memory.memory_table(list(_zero_measurements()))


def zero_traffic_table() -> Table:
    """Elements per rank per step for k micro-batches, stages 0-3."""
    return zero_memory.traffic_table()


def zero_fsdp2_traffic_table() -> Table:
    """FSDP2's elements per rank and step for k micro-batches, by setting."""
    ks = (1, 4, 16)
    return Table(
        ["FSDP2 setting", *(f"k = {k}" for k in ks)],
        fsdp2_traffic_rows(ks),
        note=(
            "Elements sent per rank per optimizer step, in units of Psi; each "
            "setting adds to the one above it. The tests count the all-gathers and "
            "reduce-scatters of fully_shard on 2 gloo ranks with k = 3 and find "
            "these."
        ),
    )


def zero_memory_vs_ranks_figure() -> Figure:
    """Llama 3 8B's model states per GPU against N_d, each stage, 80 GB line."""
    return memory_figures.zero_memory_vs_ranks_figure(EXAMPLE)


def zero_compare_parameters() -> int:
    """Parameters of the MLP that ours, DeepSpeed and FSDP2 train alike."""
    return sum(p.numel() for p in mlp(WIDTHS).parameters())


def zero_loss_table() -> Table:
    """First and last loss of every implementation and its gap to one process."""
    return zero_results.loss_table()


def zero_max_loss_gap() -> float:
    """The largest loss gap to one process over implementations and steps."""
    return zero_results.max_loss_gap()


def zero_estimator_table() -> Table:
    """DeepSpeed's memory estimates beside the paper's formulas."""
    return zero_results.estimator_table()


@functools.cache
def _zero_clip_norms() -> tuple[float, ...]:
    """One process's gradient norm before clipping, per step of the comparison."""
    config = results.load("zero")["config"]
    batches = regression_batches(
        config["n_steps"], config["batch"], WIDTHS[0], WIDTHS[-1]
    )
    norms: list[float] = []
    train_one_process(WIDTHS, batches, norms)
    return tuple(norms)


def zero_min_clip_norm() -> float:
    """The smallest of those norms: still above ``ZERO_MAX_GRAD_NORM``."""
    return min(_zero_clip_norms())


def zero_max_clip_norm() -> float:
    """The largest of those norms."""
    return max(_zero_clip_norms())
