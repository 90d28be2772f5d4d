"""Bad input: every public collective raises the documented error before any message.

Errors one rank can see are checked in this process, on a one-rank gloo group. Errors
only the group can see (a rank outside the group, sizes that differ between ranks)
need real ranks: there, every rank must raise the same ValueError instead of hanging.
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
from aiinfra.comm._validate import resolve_op
from aiinfra.distributed import run_distributed

ALL_REDUCES = (ring_all_reduce, recursive_doubling_all_reduce, rabenseifner_all_reduce)


@pytest.fixture(scope="module")
def one_rank():
    """A one-rank gloo world in this process (p = 1), torn down after the module."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield Hierarchy.create(1)
    dist.destroy_process_group()


def _hier(tensor, op="sum"):
    return lambda h: hierarchical_all_reduce(tensor, h, op)


def _plain(fn, *args, **kwargs):
    return lambda h: fn(*args, **kwargs)


ones = torch.ones
CASES = []
for fn in ALL_REDUCES:
    n = fn.__name__
    CASES += [
        pytest.param(
            _plain(fn, [1.0]),
            TypeError,
            "tensor must be a torch.Tensor",
            id=f"{n}-list",
        ),
        pytest.param(
            _plain(fn, ones(3, dtype=torch.bool)),
            TypeError,
            r"tensor.dtype must be one of .*got torch.bool",
            id=f"{n}-bool",
        ),
        pytest.param(
            _plain(fn, ones(3, dtype=torch.complex64)),
            TypeError,
            "tensor.dtype must be one of",
            id=f"{n}-complex",
        ),
        pytest.param(
            _plain(fn, ones(0)), ValueError, "tensor must not be empty", id=f"{n}-empty"
        ),
        pytest.param(
            _plain(fn, ones(4, 2).t()),
            ValueError,
            "tensor must be contiguous",
            id=f"{n}-strided",
        ),
        pytest.param(
            _plain(fn, ones(3), dist.ReduceOp.AVG),
            ValueError,
            r"op must be one of \('sum', 'prod', 'max', 'min'\)",
            id=f"{n}-avg",
        ),
        pytest.param(
            _plain(fn, ones(3), "mean"), ValueError, "op must be one of", id=f"{n}-mean"
        ),
    ]
CASES += [
    pytest.param(
        _plain(ring_reduce_scatter, ones(2), ones(3)),
        ValueError,
        r"input.numel\(\) must be group size 1 x output.numel\(\) 2, got 3",
        id="reduce_scatter-sizes",
    ),
    pytest.param(
        _plain(ring_reduce_scatter, ones(2), ones(2, dtype=torch.int32)),
        TypeError,
        "input.dtype torch.int32 != output.dtype torch.float32",
        id="reduce_scatter-dtypes",
    ),
    pytest.param(
        _plain(ring_reduce_scatter, ones(2), ones(2), dist.ReduceOp.BAND),
        ValueError,
        "op must be one of",
        id="reduce_scatter-band",
    ),
    pytest.param(
        _plain(ring_reduce_scatter, ones(0), ones(0)),
        ValueError,
        "output must not be empty",
        id="reduce_scatter-empty",
    ),
    pytest.param(
        _plain(ring_reduce_scatter, ones(2), ones(4, 2).t()[0]),
        ValueError,
        "input must be contiguous",
        id="reduce_scatter-strided",
    ),
    pytest.param(
        _plain(ring_all_gather, ones(3), ones(2)),
        ValueError,
        r"output.numel\(\) must be group size 1 x input.numel\(\) 2, got 3",
        id="all_gather-sizes",
    ),
    pytest.param(
        _plain(ring_all_gather, ones(2, dtype=torch.int64), ones(2)),
        TypeError,
        "input.dtype torch.float32 != output.dtype torch.int64",
        id="all_gather-dtypes",
    ),
    pytest.param(
        _plain(ring_all_gather, "out", ones(2)),
        TypeError,
        "output must be a torch.Tensor",
        id="all_gather-str",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(3), 1),
        ValueError,
        r"src must be a group rank in \[0, 1\), got 1",
        id="broadcast-src",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(3), -1),
        ValueError,
        "src must be a group rank",
        id="broadcast-negative-src",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(3), True),
        ValueError,
        "src must be a group rank",
        id="broadcast-bool-src",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(0)),
        ValueError,
        "tensor must not be empty",
        id="broadcast-empty",
    ),
    pytest.param(
        _plain(binomial_reduce, ones(3), 2),
        ValueError,
        r"dst must be a group rank in \[0, 1\), got 2",
        id="reduce-dst",
    ),
    pytest.param(
        _plain(binomial_reduce, ones(3), 0, dist.ReduceOp.AVG),
        ValueError,
        "op must be one of",
        id="reduce-avg",
    ),
    pytest.param(
        _plain(binomial_reduce, ones(3, dtype=torch.bool)),
        TypeError,
        "tensor.dtype must be one of",
        id="reduce-bool",
    ),
    pytest.param(
        _plain(pairwise_all_to_all, ones(3), ones(4)),
        ValueError,
        r"output.numel\(\) 3 != input.numel\(\) 4",
        id="all_to_all-sizes",
    ),
    pytest.param(
        _plain(pairwise_all_to_all, ones(4, dtype=torch.int32), ones(4)),
        TypeError,
        "input.dtype torch.float32 != output.dtype torch.int32",
        id="all_to_all-dtypes",
    ),
    pytest.param(
        lambda h: pairwise_all_to_all(*ones(2, 4)),
        ValueError,
        "output and input must not share memory",
        id="all_to_all-aliased",
    ),
    pytest.param(
        _plain(pairwise_all_to_all, ones(4), ones(0)),
        ValueError,
        "input must not be empty",
        id="all_to_all-empty",
    ),
    pytest.param(
        _plain(Hierarchy.create, 0),
        ValueError,
        "local_size must be an int >= 1 dividing the group size 1, got 0",
        id="hierarchy-zero",
    ),
    pytest.param(
        _plain(Hierarchy.create, 2),
        ValueError,
        "local_size must be an int >= 1 dividing",
        id="hierarchy-not-divisor",
    ),
    pytest.param(
        _plain(Hierarchy.create, "1"),
        ValueError,
        "local_size must be an int",
        id="hierarchy-str",
    ),
    pytest.param(
        _hier(ones(0)), ValueError, "tensor must not be empty", id="hierarchical-empty"
    ),
    pytest.param(
        _hier(ones(3), "avg"), ValueError, "op must be one of", id="hierarchical-avg"
    ),
    pytest.param(
        _plain(hierarchical_all_reduce, ones(3), 2),
        TypeError,
        "hierarchy must be a Hierarchy, got int",
        id="hierarchical-not-hier",
    ),
]


@pytest.mark.parametrize(("call", "error", "match"), CASES)
def test_bad_input_raises_documented_error(one_rank, call, error, match):
    with pytest.raises(error, match=match):
        call(one_rank)


@pytest.mark.parametrize(
    ("op", "name"),
    [
        ("sum", "sum"),
        ("prod", "prod"),
        ("max", "max"),
        ("min", "min"),
        (dist.ReduceOp.SUM, "sum"),
        (dist.ReduceOp.PRODUCT, "prod"),
        (dist.ReduceOp.MAX, "max"),
        (dist.ReduceOp.MIN, "min"),
        (dist.ReduceOp(dist.ReduceOp.MIN), "min"),  # an instance, not the enum
    ],
)
def test_resolve_op_accepts_names_and_reduce_ops(op, name):
    assert resolve_op(op) == name


@pytest.mark.parametrize(
    "op",
    [dist.ReduceOp.AVG, dist.ReduceOp.BAND, dist.ReduceOp.BOR, "SUM", "avg", None, 0],
)
def test_resolve_op_rejects_other_ops(op):
    with pytest.raises(ValueError, match="op must be one of"):
        resolve_op(op)


def _every_rank_raises_the_same_error() -> tuple[dict, dict]:
    """On 3 ranks, rank 2 disagrees with ranks 0 and 1; return each call's error."""
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
        "reduce_scatter numel": lambda: ring_reduce_scatter(x, x.repeat(3)),
        "reduce_scatter op": lambda: ring_reduce_scatter(ones(2), ones(6), op),
        "all_gather dtype": lambda: ring_all_gather(y.repeat(3), y),
        "broadcast numel": lambda: binomial_broadcast(x.clone()),
        "broadcast src": lambda: binomial_broadcast(ones(3), 1 if odd else 0),
        "reduce dst": lambda: binomial_reduce(ones(3), 1 if odd else 0),
        "reduce op": lambda: binomial_reduce(ones(3), 0, op),
        "all_to_all numel": lambda: pairwise_all_to_all(
            ones(6 if odd else 3), ones(6 if odd else 3)
        ),
        "hierarchical numel": lambda: hierarchical_all_reduce(x.clone(), h),
    }
    raised = {key: error(call) for key, call in mismatch.items()}
    pair = dist.new_group([0, 1])  # rank 2 is outside it
    local = {
        "all_to_all split": error(lambda: pairwise_all_to_all(ones(4), ones(4))),
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


def test_mismatch_across_ranks_raises_the_same_error_on_every_rank():
    results = run_distributed(_every_rank_raises_the_same_error, 3, timeout=90)
    raised = [r[0] for r in results]
    expect = {
        "numel": r"numel\(\) differs across the ranks of the group: \[(7, 7, 8|3, 3, 6"
        r"|21, 21, 24)\]",
        "dtype": r"dtype differs across the ranks of the group: \[torch.float32, "
        r"torch.float32, torch.float64\]",
        "op": r"op differs across the ranks of the group: \['sum', 'sum', 'max'\]",
        "src": r"src differs across the ranks of the group: \[0, 0, 1\]",
        "dst": r"dst differs across the ranks of the group: \[0, 0, 1\]",
    }
    for key, message in raised[0].items():
        assert message is not None, f"{key}: no error"
        assert all(r[key] == message for r in raised), f"{key}: ranks disagree"
        assert re.search(expect[key.split()[-1]], message), message
    local = results[2][1]
    assert "must be a multiple of group size 3" in local.pop("all_to_all split")
    for key, message in local.items():
        assert message is not None and "not a member of group" in message, key


def _rank_one_passes_a_longer_tensor() -> None:
    ring_all_reduce(torch.ones(7 + dist.get_rank()))


def test_mismatched_sizes_fail_with_value_error_instead_of_hanging():
    with pytest.raises(
        RuntimeError,
        match=r"ValueError: tensor.numel\(\) differs "
        r"across the ranks of the group: \[7, 8\]",
    ):
        run_distributed(_rank_one_passes_a_longer_tensor, 2, timeout=60)
