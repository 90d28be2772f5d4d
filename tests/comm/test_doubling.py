"""Recursive doubling and Rabenseifner all-reduce against gloo, on 2, 3 and 4 ranks."""

import pytest
from aiinfra.comm import rabenseifner_all_reduce, recursive_doubling_all_reduce
from aiinfra.comm.doubling import new_to_group_rank, power_of_two_split
from aiinfra.distributed import rank_device

from tests.comm.collective_checks import check_all_reduce, spawned_results


def doubling_checks(groups) -> list[str]:
    """Rank side: both all-reduces on each group against torch's."""
    # The trio [1, 2, 3] is not a power of two: it folds (rank 0 of the trio hands its
    # vector to rank 1), which is the MPICH path of both algorithms.
    failures: list[str] = []
    for name, g in groups:
        for fn in (recursive_doubling_all_reduce, rabenseifner_all_reduce):
            what = f"{fn.__name__} group={name}"
            check_all_reduce(failures, fn, what, g, rank_device())
    return failures


@pytest.mark.slow
def test_doubling_all_reduces_match_gloo_on_2_3_and_4_ranks():
    for rank, r in enumerate(spawned_results()):
        assert r["doubling_checks"] == [], f"rank {rank}: {r['doubling_checks'][:5]}"


@pytest.mark.parametrize("p", range(1, 34))
def test_fold_keeps_the_odd_partners_and_the_ranks_beyond_them(p):
    # Thakur, Rabenseifner & Gropp (2005): with r' = p - p', the even ranks
    # below 2r' idle; the p' survivors get new ranks 0..p'-1 in order.
    p2, extra = power_of_two_split(p)
    assert p2 & (p2 - 1) == 0 and p2 <= p < 2 * p2
    survivors = [r for r in range(p) if r >= 2 * extra or r % 2 == 1]
    assert [new_to_group_rank(i, extra) for i in range(p2)] == survivors
