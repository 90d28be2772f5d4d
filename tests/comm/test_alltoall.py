"""Pairwise-exchange all-to-all against gloo's all_to_all_single."""

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm import pairwise_all_to_all

from tests.comm.collective_checks import DTYPES, expect, rank_input, spawned_results


def all_to_all_checks(groups) -> list[str]:
    """Rank side: the pairwise all-to-all on each group against torch's."""
    failures: list[str] = []
    for name, g in groups:
        r, p = dist.get_rank(g), dist.get_world_size(g)
        for m in (1, 7, 251):  # elements per block; n = p m per rank
            for dtype in DTYPES:
                what = f"pairwise_all_to_all group={name} m={m} {dtype}"
                x = rank_input(r, p * m, dtype, "sum")
                expected = torch.empty_like(x)
                dist.all_to_all_single(expected, x, group=g)
                out = torch.empty_like(x)
                check = dtype != torch.int64
                pairwise_all_to_all(out, x, g, check_consistency=check)
                expect(failures, torch.equal(out, expected), what)
                unchanged = torch.equal(x, rank_input(r, p * m, dtype, "sum"))
                expect(failures, unchanged, f"{what}: input modified")
        # A (p, 3, 2) tensor: block j is x[j], as with all_to_all_single.
        x = torch.arange(p * 6.0).view(p, 3, 2) + 100 * r
        expected = torch.empty_like(x)
        dist.all_to_all_single(expected, x, group=g)
        out = torch.empty_like(x)
        pairwise_all_to_all(out, x, g)
        expect(failures, torch.equal(out, expected), f"3-D all-to-all group={name}")
    return failures


@pytest.mark.slow
def test_pairwise_all_to_all_matches_gloo_on_2_3_and_4_ranks():
    # One spawn of 4 ranks covers groups of 4, 3 ([1, 2, 3]) and 2 ([0, 2], [1, 3]).
    for rank, r in enumerate(spawned_results()):
        assert r["all_to_all_checks"] == [], f"rank {rank}"
