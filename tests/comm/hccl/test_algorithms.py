"""HCCL's all-reduce algorithms and Pairwise all-to-all against gloo, on 2 to 8 ranks.

One spawn of 8 gloo ranks holds groups of every size from 2 to 8 (the odd ones
3, 5 and 7 included), each made of the last k global ranks so that group ranks and
global ranks differ; on each group every algorithm's result is compared with
torch.distributed's own all-reduce (and ``all_to_all_single``) on the same inputs.
"""

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm import pairwise_all_to_all, rabenseifner_all_reduce, ring_all_reduce
from aiinfra.comm.hccl.algorithms import mesh_all_reduce, nb_all_reduce, nhr_all_reduce

from tests.comm.collective_checks import check_all_reduce, expect
from tests.shared_spawn import shared_results

WORLD = 8
SIZES = (1, 7, 1003)  # fewer elements than ranks (empty slices), a prime, 1000 + 3
DTYPES = (torch.float32, torch.int64)
ALL_REDUCES = {  # HCCL_ALGO name -> implementation
    "ring": ring_all_reduce,
    "Mesh": mesh_all_reduce,
    "H-D_R": rabenseifner_all_reduce,
    "NHR": nhr_all_reduce,
    "NB": nb_all_reduce,
}


def _groups() -> list[tuple[int, dist.ProcessGroup | None]]:
    """(size, group) for every size 2..8 that this rank belongs to."""
    rank, out = dist.get_rank(), []
    for k in range(2, WORLD):
        g = dist.new_group(list(range(WORLD - k, WORLD)))  # every rank calls it
        if rank >= WORLD - k:
            out.append((k, g))
    return [*out, (WORLD, None)]


def hccl_checks() -> list[str]:
    """Rank side: each algorithm on each group of this rank, against torch's."""
    failures: list[str] = []
    dev = torch.device("cpu")
    for k, g in _groups():
        for name, fn in ALL_REDUCES.items():
            check_all_reduce(failures, fn, f"{name} p={k}", g, dev, SIZES, DTYPES)
        r = dist.get_rank(g)
        x = torch.arange(k * 3, dtype=torch.float64) + 100 * r  # (3k,): 3 per peer
        want, got = torch.empty_like(x), torch.empty_like(x)
        dist.all_to_all_single(want, x, group=g)
        pairwise_all_to_all(got, x, g)
        expect(failures, torch.equal(got, want), f"pairwise p={k}")
    return failures


@pytest.mark.slow
def test_hccl_algorithms_match_gloo_on_2_to_8_ranks():
    results = shared_results(hccl_checks, WORLD, timeout=400)
    for rank, failures in enumerate(results):
        assert failures == [], f"rank {rank}: {failures[:5]}"
