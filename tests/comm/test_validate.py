"""Bad input: every public collective raises the documented error before any message.

Errors one rank can see are checked in this process, on a one-rank gloo group. Errors
only the group can see (a rank outside the group, sizes that differ between ranks)
need real ranks: ``test_mismatch`` checks those.
"""

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
    *[
        pytest.param(
            _plain(fn, *tensors, segments=bad),
            ValueError,
            r"segments must be an int >= 1, got " + str(bad).replace(".", r"\."),
            id=f"{fn.__name__}-segments-{bad}",
        )
        for fn, tensors in [
            (ring_all_reduce, (ones(4),)),
            (ring_reduce_scatter, (ones(2), ones(2))),
            (ring_all_gather, (ones(2), ones(2))),
        ]
        for bad in (0, -2, 1.5, True)
    ],
    pytest.param(
        _plain(binomial_broadcast, ones(3), 1),
        ValueError,
        r"src must be an int in \[0, 0\], got 1",
        id="broadcast-src",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(3), -1),
        ValueError,
        "src must be an int in",
        id="broadcast-negative-src",
    ),
    pytest.param(
        _plain(binomial_broadcast, ones(3), True),
        ValueError,
        "src must be an int in",
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
        r"dst must be an int in \[0, 0\], got 2",
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
