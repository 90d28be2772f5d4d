"""NHR's and NB's steps against HCCL's published step and slice counts."""

import math

import pytest
from aiinfra.comm.hccl.schedules import (
    KINDS,
    all_gather_steps,
    reduce_scatter_steps,
    simulate_reduce_scatter,
    step_count,
)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", range(1, 18))
def test_every_rank_ends_with_its_slice_reduced_over_all_ranks_once(kind, p):
    held = simulate_reduce_scatter(kind, p)  # raises on a contribution added twice
    assert all(held[r][r] == frozenset(range(p)) for r in range(p))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("p", range(1, 18))
def test_ceil_lg_p_steps_and_p_minus_1_slices_per_rank(kind, p):
    # HCCL's NHR and NB pages: ceil(log2 p) steps for any p, and the time
    # ... + ((p-1)/p) n beta: each rank sends p - 1 slices of n/p in all.
    assert step_count(p) == math.ceil(math.log2(p))
    for r in range(p):
        rs = reduce_scatter_steps(kind, r, p)
        assert len(rs) == step_count(p)
        assert sum(len(x.send) for x in rs) == p - 1
        ag = all_gather_steps(kind, r, p)
        assert sum(len(x.send) for x in ag) == p - 1


def test_slices_per_step_follow_hccls_formula_and_a_hand_count():
    # HCCL's NB page: step k at stride 2^k sends floor((N - 1 + 2^k) / 2^(k+1))
    # blocks. By hand for N = 5: strides 1, 2, 4 carry 2, 1, 1 slices (4 = N - 1).
    for kind in KINDS:
        assert [len(x.send) for x in reduce_scatter_steps(kind, 0, 5)] == [2, 1, 1]
    for n in range(2, 40):
        for k, x in enumerate(reduce_scatter_steps("nb", 0, n)):
            assert len(x.send) == (n - 1 + 2**k) // 2 ** (k + 1)


def test_nhr_sends_left_and_nb_right_at_doubling_distances():
    # By hand, rank 0 of 5: NHR sends to 4, 3, 1 (r - 1, r - 2, r - 4 mod 5); NB to
    # 1, 2, 4; the first NHR message carries the partial sums of slices 4 and 2.
    nhr, nb = reduce_scatter_steps("nhr", 0, 5), reduce_scatter_steps("nb", 0, 5)
    assert [x.dst for x in nhr] == [4, 3, 1] and [x.dst for x in nb] == [1, 2, 4]
    assert nhr[0].send == (4, 2) and nb[0].send == (1, 3)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="kind"):
        reduce_scatter_steps("ring", 0, 4)
    with pytest.raises(ValueError, match="r"):
        reduce_scatter_steps("nhr", 4, 4)
    with pytest.raises(ValueError, match="p"):
        step_count(0)
