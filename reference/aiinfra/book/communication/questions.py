"""What ``docs/communication/questions.rst`` shows: the numbers of its answers."""

from __future__ import annotations

from aiinfra.comm import cost, schedules

from ._common import BYTES, MIB


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
    return cost.ring_all_reduce_time(64 * MIB / 4, 2, BYTES) / MIB


def flat_ring_mib() -> float:
    """MiB each rank sends in a flat ring all-reduce of 64 MiB on 8 ranks."""
    return cost.ring_all_reduce_time(64 * MIB, 8, BYTES) / MIB
