"""Values, tables and figures of the cost model, NCCL and bandwidth pages.

The cost-model numbers use the illustrative links of :data:`aiinfra.comm.cost.LINKS`;
the measured ones read the ``collectives`` results (:mod:`aiinfra.results`).
"""

from __future__ import annotations

from dataclasses import replace

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.comm import bench, cost, figures, nccl_model, paired, schedules
from aiinfra.comm import results as busbw
from aiinfra.report import Table

MIB = 2**20
_BYTES = cost.LinkModel(alpha=0.0, beta=1.0, name="bytes")  # the time is bytes sent


# cost_model.rst


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


# nccl.rst


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


# questions.rst


def ring_steps_8_ranks() -> int:
    """Communication steps of the ring all-reduce on 8 ranks."""
    return len(schedules.simulate_ring_all_reduce(8)) - 1


def recursive_doubling_steps_8_ranks() -> int:
    """Communication steps of recursive doubling on 8 ranks."""
    return len(schedules.simulate_recursive_doubling(8)) - 1


def rabenseifner_steps_8_ranks() -> int:
    """Communication steps of Rabenseifner's all-reduce on 8 ranks."""
    return len(schedules.simulate_halving_doubling(8)) - 1


def broadcast_round_of_rank_5() -> int:
    """The round in which rank 5 receives a binomial broadcast from rank 0 of 8."""
    rounds = schedules.simulate_binomial_broadcast(8, root=0)
    return next(k for k, st in enumerate(rounds) if any(d == 5 for _, d in st.sends))


def broadcast_parent_of_rank_5() -> int:
    """The rank that sends a binomial broadcast from rank 0 of 8 to rank 5."""
    rounds = schedules.simulate_binomial_broadcast(8, root=0)
    return next(s for st in rounds for s, d in st.sends if d == 5)


def hierarchical_inter_node_mib() -> float:
    """MiB each rank sends between nodes: hierarchical all-reduce, 64 MiB, 2 x 4."""
    return cost.ring_all_reduce_time(64 * MIB / 4, 2, _BYTES) / MIB


def flat_ring_mib() -> float:
    """MiB each rank sends in a flat ring all-reduce of 64 MiB on 8 ranks."""
    return cost.ring_all_reduce_time(64 * MIB, 8, _BYTES) / MIB
