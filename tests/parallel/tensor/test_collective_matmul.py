"""Collective matmul: the overlapped ring steps give the plain TP result.

Ground truth: the unsplit product ``X W^T`` in fp64 on one process (what an
all-gather then a matmul, or a matmul then a reduce-scatter, computes), compared
with the decomposed ring on 2 and 4 gloo ranks; the pipeline's exposed time by
hand: k = 1 is the whole transfer; a transfer shorter than the compute leaves only
the first chunk's share; a longer one leaves the first chunk plus each later
chunk's excess.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm.cost import LINKS, ring_all_gather_time
from aiinfra.distributed import run_distributed
from aiinfra.parallel.tensor.collective_matmul import (
    all_gather_matmul,
    chunked_all_gather_exposed,
    exposed_seconds,
    matmul_reduce_scatter,
)


def _both_ways() -> tuple[float, float]:
    p, r = dist.get_world_size(), dist.get_rank()
    g = torch.Generator().manual_seed(0)
    t, h, n = 4 * p, 6 * p, 5 * p
    x = torch.randn(t, h, generator=g, dtype=torch.float64)
    w = torch.randn(n, h, generator=g, dtype=torch.float64)
    tl, nl, hl = t // p, n // p, h // p
    gathered = all_gather_matmul(x[r * tl : (r + 1) * tl], w[r * nl : (r + 1) * nl])
    scattered = matmul_reduce_scatter(
        x[:, r * hl : (r + 1) * hl], w[:, r * hl : (r + 1) * hl]
    )
    return (
        (x @ w[r * nl : (r + 1) * nl].T - gathered).abs().max().item(),
        ((x @ w.T)[r * tl : (r + 1) * tl] - scattered).abs().max().item(),
    )


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_the_ring_steps_give_the_plain_tp_result(world_size):
    for gather_error, scatter_error in run_distributed(
        _both_ways, world_size, timeout=90
    ):
        assert gather_error == 0  # the same rows, each computed once
        assert scatter_error < 1e-12  # sums in another order


def test_the_exposed_time_by_hand():
    assert exposed_seconds(compute=4.0, transfer=2.0, chunks=1) == 2.0
    assert exposed_seconds(compute=4.0, transfer=2.0, chunks=4) == 0.5  # first chunk
    # transfer 8 in 4 chunks of 2, compute 1 per chunk: 2 + 3 x (2 - 1)
    assert exposed_seconds(compute=4.0, transfer=8.0, chunks=4) == 5.0


def test_each_chunk_pays_the_rings_latency_again():
    link, n, p = "h100-nvlink", 2**27, 8
    plain = chunked_all_gather_exposed(n, p, 1.0, 1, link)
    assert plain == ring_all_gather_time(n, p, link)
    many = chunked_all_gather_exposed(n, p, 0.0, 4096, link)  # nothing to hide behind
    assert many > (p - 1) * LINKS[link].alpha * 4096  # latency dominates


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: exposed_seconds(1.0, 1.0, 0), "chunks"),
        (lambda: exposed_seconds(-1.0, 1.0, 2), "compute"),
        (lambda: chunked_all_gather_exposed(1e6, 8, 1.0, 2, "pcie9"), "link"),
    ],
)
def test_bad_arguments_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()
