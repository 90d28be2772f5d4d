"""Mismatches only the group can see: every rank raises the same error, none hangs.

Sizes, dtypes, ops and roots that differ between ranks, and a rank outside the group,
are checked on 4 ranks of the spawn the collective tests share (``collective_checks``):
rank 2 passes something different from ranks 0, 1 and 3. A rank that raised alone
would leave the others waiting in the collective; every call returning, with the same
ValueError on every rank, shows the consistency check turns a hang into an error.
"""

import re

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm import (
    Hierarchy,
    binomial_broadcast,
    binomial_reduce,
    hierarchical_all_reduce,
    pairwise_all_to_all,
    rabenseifner_all_reduce,
    recursive_doubling_all_reduce,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)

from tests.comm.collective_checks import spawned_results

ALL_REDUCES = (ring_all_reduce, recursive_doubling_all_reduce, rabenseifner_all_reduce)
ones = torch.ones


def mismatch_errors(groups) -> tuple[dict, dict]:
    """Rank side, 4 ranks: rank 2 disagrees with the others; each call's error."""
    r = dist.get_rank()
    odd = r == 2  # the rank that passes something different

    def error(call) -> str | None:
        try:
            call()
        except ValueError as e:
            return str(e)
        return None

    x = ones(8 if odd else 7)  # numel differs on rank 2
    y = ones(7, dtype=torch.float64 if odd else torch.float32)  # dtype differs
    op = "max" if odd else "sum"
    h = Hierarchy.create(1)
    mismatch = {
        "ring_all_reduce numel": lambda: ring_all_reduce(x.clone()),
        "ring_all_reduce dtype": lambda: ring_all_reduce(y.clone()),
        "ring_all_reduce op": lambda: ring_all_reduce(ones(7), op),
        "recursive_doubling numel": lambda: recursive_doubling_all_reduce(x.clone()),
        "rabenseifner op": lambda: rabenseifner_all_reduce(ones(7), op),
        "reduce_scatter numel": lambda: ring_reduce_scatter(x, x.repeat(4)),
        "reduce_scatter op": lambda: ring_reduce_scatter(ones(2), ones(8), op),
        "all_gather dtype": lambda: ring_all_gather(y.repeat(4), y),
        "broadcast numel": lambda: binomial_broadcast(x.clone()),
        "broadcast src": lambda: binomial_broadcast(ones(3), 1 if odd else 0),
        "reduce dst": lambda: binomial_reduce(ones(3), 1 if odd else 0),
        "reduce op": lambda: binomial_reduce(ones(3), 0, op),
        "all_to_all numel": lambda: pairwise_all_to_all(
            ones(8 if odd else 4), ones(8 if odd else 4)
        ),
        "hierarchical numel": lambda: hierarchical_all_reduce(x.clone(), h),
    }
    raised = {key: error(call) for key, call in mismatch.items()}
    pair = dist.new_group([0, 1])  # ranks 2 and 3 are outside it
    local = {
        "all_to_all split": error(lambda: pairwise_all_to_all(ones(6), ones(6))),
    }
    if odd:
        for fn in ALL_REDUCES:
            local[fn.__name__] = error(lambda fn=fn: fn(ones(3), group=pair))
        local["reduce_scatter"] = error(
            lambda: ring_reduce_scatter(ones(1), ones(2), group=pair)
        )
        local["all_gather"] = error(lambda: ring_all_gather(ones(2), ones(1), pair))
        local["broadcast"] = error(lambda: binomial_broadcast(ones(3), group=pair))
        local["reduce"] = error(lambda: binomial_reduce(ones(3), group=pair))
        local["all_to_all"] = error(lambda: pairwise_all_to_all(ones(2), ones(2), pair))
        local["hierarchy"] = error(lambda: Hierarchy.create(1, group=pair))
    return raised, local


@pytest.mark.slow
def test_mismatch_across_ranks_raises_the_same_error_on_every_rank():
    results = [r["mismatch_errors"] for r in spawned_results()]
    raised = [r[0] for r in results]
    expect = {
        "numel": r"numel\(\) differs across the ranks of the group: "
        r"\[(7, 7, 8, 7|4, 4, 8, 4)\]",
        "dtype": r"dtype differs across the ranks of the group: \[torch.float32, "
        r"torch.float32, torch.float64, torch.float32\]",
        "op": r"op differs across the ranks of the group: "
        r"\['sum', 'sum', 'max', 'sum'\]",
        "src": r"src differs across the ranks of the group: \[0, 0, 1, 0\]",
        "dst": r"dst differs across the ranks of the group: \[0, 0, 1, 0\]",
    }
    assert len(raised[0]) == 14
    for key, message in raised[0].items():
        assert message is not None, f"{key}: no error"
        assert all(r[key] == message for r in raised), f"{key}: ranks disagree"
        assert re.search(expect[key.split()[-1]], message), message
    for r in results:
        assert "must be a multiple of group size 4" in r[1]["all_to_all split"]
    local = results[2][1]
    local.pop("all_to_all split")
    assert len(local) == 9
    for key, message in local.items():
        assert message is not None and "not a member of group" in message, key
