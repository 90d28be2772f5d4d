"""Megatron tensor and sequence parallelism against the unsharded layers.

Ground truth: the same weights in one ``nn.Module`` in one process, in float64
(``nn.Linear``s and :class:`~aiinfra.models.layers.SwiGLU`), forward and backward
under a random upstream gradient. Ground truth for the traffic: Shoeybi et al. 2019
(Megatron-LM, Fig. 4; FACTS.md "Tensor parallelism"): an MLP needs one all-reduce
forward (``g``) and one backward (``f``), each of the ``b T h`` activations; with
sequence parallelism (Korthikanti et al. 2022) each becomes an all-gather plus a
reduce-scatter of the same ``b T h`` buffer, the same total. The rank side,
:func:`tensor_parallel_checks`, runs inside :mod:`spawned`'s one 4-rank spawn shared
with ``test_ddp`` and ``test_zero``: N = 4 (the world) and N = 2 (the pairs [0, 2],
[1, 3]). Bad input is checked in this process on a one-rank gloo group, and on N = 4
and N = 2 inside the spawn (sizes that divide 1 always).
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
from aiinfra.comm.counter import CommCounter
from aiinfra.distributed import rank_device
from aiinfra.memory.measure import SavedTensorLog
from aiinfra.models.layers import SwiGLU
from aiinfra.parallel.tensor.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    TensorParallelSwiGLU,
)
from aiinfra.parallel.tensor.ops import shard_size, split_sequence
from torch import nn

from tests.parallel.spawned import gloo_results
from tests.parallel.spawned import value_error as _error

B, T, H, D_FF = 2, 4, 8, 16  # b T h = 64 activations, 8 bytes each in float64
GROUPS = {"world": 4, "pair": 2}
ATOL = 1e-12  # float64; sums in another order


def _randomize(module: nn.Module, seed: int) -> nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype))
    return module


def _randn(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64)


def _diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().cpu() - b.detach().cpu()).abs().max().item()


def _chunk(t: torch.Tensor, dim: int, rank: int, n: int) -> torch.Tensor:
    return t.chunk(n, dim)[rank]


def _backward(module, x, grad):
    """Forward ``x`` (a fresh leaf), backward ``grad``; returns output and x.grad."""
    x = x.clone().requires_grad_()
    y = module(x)
    (y * grad).sum().backward()
    return y, x.grad


def _layer_checks(group, device) -> dict:
    """Column (gathered output) and row (full input) layers against nn.Linear."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    out = {}
    x, grad = _randn(B, T, H, seed=1).to(device), _randn(B, T, D_FF, seed=2).to(device)
    full = _randomize(nn.Linear(H, D_FF).double(), 3).to(device)
    col = ColumnParallelLinear.from_linear(full, group, gather_output=True)
    y_ref, gx_ref = _backward(full, x, grad)
    y, gx = _backward(col, x, grad)
    out["column"] = {
        "y": _diff(y, y_ref),
        "x.grad": _diff(gx, gx_ref),
        "weight.grad": _diff(col.weight.grad, _chunk(full.weight.grad, 0, rank, n)),
        "bias.grad": _diff(col.bias.grad, _chunk(full.bias.grad, 0, rank, n)),
    }
    x, grad = _randn(B, T, D_FF, seed=4).to(device), _randn(B, T, H, seed=5).to(device)
    full = _randomize(nn.Linear(D_FF, H).double(), 6).to(device)
    row = RowParallelLinear.from_linear(full, group, input_is_parallel=False)
    y_ref, gx_ref = _backward(full, x, grad)
    y, gx = _backward(row, x, grad)
    out["row"] = {
        "y": _diff(y, y_ref),
        "x.grad": _diff(gx, gx_ref),
        "weight.grad": _diff(row.weight.grad, _chunk(full.weight.grad, 1, rank, n)),
        "bias.grad": _diff(row.bias.grad, full.bias.grad),
    }
    return out


def _mlp_checks(group, device, sequence_parallel: bool) -> dict:
    """The tensor-parallel SwiGLU against SwiGLU: outputs, gradients, collectives."""
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    full = _randomize(SwiGLU(H, D_FF, bias=True).double(), 7).to(device)
    x, grad = _randn(B, T, H, seed=8).to(device), _randn(B, T, H, seed=9).to(device)
    y_ref, gx_ref = _backward(full, x, grad)
    tp = TensorParallelSwiGLU.from_swiglu(full, group, sequence_parallel)
    if sequence_parallel:  # input, output and their gradients are sequence shards
        x, grad = split_sequence(x, tp.comm), split_sequence(grad, tp.comm)
        y_ref, gx_ref = split_sequence(y_ref, tp.comm), split_sequence(gx_ref, tp.comm)
    y, gx = _backward(tp, x, grad)
    log = list(tp.comm.log)
    b2 = tp.w2.bias.grad.clone()
    if sequence_parallel:  # each rank's bias gradient covers its own positions
        dist.all_reduce(b2, group=group)
    out = {"y": _diff(y, y_ref), "x.grad": _diff(gx, gx_ref)}
    out["w2.bias.grad"] = _diff(b2, full.w2.bias.grad)
    for name in ("w1", "w3"):
        shard = getattr(tp, name)
        ref = getattr(full, name)
        out[f"{name}.weight.grad"] = _diff(
            shard.weight.grad, _chunk(ref.weight.grad, 0, rank, n)
        )
        out[f"{name}.bias.grad"] = _diff(
            shard.bias.grad, _chunk(ref.bias.grad, 0, rank, n)
        )
    out["w2.weight.grad"] = _diff(
        tp.w2.weight.grad, _chunk(full.w2.weight.grad, 1, rank, n)
    )
    paper_bytes = tp.comm.paper_bytes()
    with SavedTensorLog([*tp.parameters(), *tp.buffers()]) as saved:
        tp(x.clone().requires_grad_())  # what autograd keeps for backward
    return {
        "diffs": out,
        "log": log,
        "paper_bytes": paper_bytes,
        "saved": saved.total_bytes,
    }


def _error_checks(group) -> dict:
    """Sizes no group of 2 or 4 divides (9, 5): each raises before any collective."""
    comm = CommCounter(group)
    errors = {
        "column": _error(
            lambda: ColumnParallelLinear.from_linear(nn.Linear(8, 9), group, comm=comm)
        ),
        "row": _error(
            lambda: RowParallelLinear.from_linear(nn.Linear(9, 8), group, comm=comm)
        ),
        "mlp": _error(lambda: TensorParallelSwiGLU.from_swiglu(SwiGLU(8, 9), group)),
        "sequence": _error(lambda: split_sequence(torch.ones(2, 5, 8), comm)),
    }
    return {"errors": errors, "log": list(comm.log)}


def tensor_parallel_checks(group: dist.ProcessGroup | None) -> dict:
    """Every tensor-parallel check on ``group``, run on its ranks; plain results."""
    start = time.perf_counter()
    device = rank_device(group)
    out = {
        "layers": _layer_checks(group, device),
        "mlp": _mlp_checks(group, device, sequence_parallel=False),
        "mlp+sp": _mlp_checks(group, device, sequence_parallel=True),
        "bad": _error_checks(group),
    }
    out["seconds"] = time.perf_counter() - start
    return out


@pytest.fixture(scope="module")
def results():
    return gloo_results()


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("layer", ["column", "row"])
def test_parallel_linear_equals_nn_linear(results, group, layer):
    for r in results:
        diffs = r[group]["tp"]["layers"][layer]
        assert set(diffs) == {"y", "x.grad", "weight.grad", "bias.grad"}
        for key, diff in diffs.items():
            assert diff < ATOL, (layer, key)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("mode", ["mlp", "mlp+sp"])
def test_parallel_swiglu_equals_swiglu(results, group, mode):
    for r in results:
        diffs = r[group]["tp"][mode]["diffs"]
        weights = {
            f"{w}.{p}.grad" for w in ("w1", "w2", "w3") for p in ("weight", "bias")
        }
        assert set(diffs) == {"y", "x.grad"} | weights
        for key, diff in diffs.items():
            assert diff < ATOL, (mode, key)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_mlp_traffic_is_megatrons_count(results, group):
    # Megatron (FACTS.md): one all-reduce g forward, one f backward, of b T h = 64
    # float64 elements; sequence parallelism: all-gather (forward, before w1/w3),
    # reduce-scatter (forward, after w2), then backward the all-gather of the
    # reduce-scatter's gradient and the reduce-scatter of the all-gather's.
    bth = B * T * H
    for r in results:
        plain, sp = r[group]["tp"]["mlp"], r[group]["tp"]["mlp+sp"]
        assert plain["log"] == [("all_reduce", bth, 8)] * 2
        assert sp["log"] == [
            ("all_gather", bth, 8),
            ("reduce_scatter", bth, 8),
            ("all_gather", bth, 8),  # backward: the reduce-scatter's gradient
            ("all_gather", bth, 8),  # the saved input shard, gathered again
            ("reduce_scatter", bth, 8),
        ]
        # An all-reduce counts twice (reduce-scatter + all-gather): 4 b T h
        # elements = 2048 bytes per rank in the paper's convention; the re-gather
        # adds one b T h (Megatron's LinearWithGradAccumulationAndAsyncCommunication).
        assert plain["paper_bytes"] == 4 * bth * 8
        assert sp["paper_bytes"] == 5 * bth * 8


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_sequence_parallel_mlp_saves_only_the_input_shard(results, group, n):
    # Counted by hand (float64): the input of w1 and w3 (one tensor), then
    # silu's input, silu's output and w3's output for the product, and w2's
    # input, each b T d_ff / p. Sequence parallelism keeps only the input's
    # shard, b T h / p (Korthikanti et al. 2022, Sec. 4.2.2): saving the gathered
    # input instead would weigh exactly as much as tensor parallelism alone.
    hidden = 4 * B * T * D_FF // n
    for r in results:
        plain, sp = r[group]["tp"]["mlp"], r[group]["tp"]["mlp+sp"]
        assert plain["saved"] == 8 * (B * T * H + hidden)
        assert sp["saved"] == 8 * (B * T * H // n + hidden)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_indivisible_sizes_raise_before_any_collective(results, group, n):
    for r in results:
        bad = r[group]["tp"]["bad"]
        assert bad["log"] == []
        tp = f"must be divisible by the tensor-parallel size {n}"
        assert bad["errors"] == {
            "column": f"out_features 9 {tp}",
            "row": f"in_features 9 {tp}",
            "mlp": f"out_features 9 {tp}",
            "sequence": (
                f"sequence length 5 must be divisible by the sequence-parallel size {n}"
            ),
        }


@pytest.fixture(scope="module")
def one_rank():
    """A one-rank gloo world in this process, torn down after the module."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize(
    ("name", "value", "t", "message"),
    [
        ("out_features", 10, 4, "out_features 10 must be divisible by the tensor"),
        ("in_features", 6, 4, "in_features 6 must be divisible by the tensor"),
        ("d_ff", 0, 2, "d_ff 0 must be divisible by the tensor-parallel size 2"),
    ],
)
def test_shard_size_names_the_argument(name, value, t, message):
    with pytest.raises(ValueError, match=message):
        shard_size(name, value, t)


def test_shard_size_divides():
    assert [shard_size("h", h, 4) for h in (4, 8, 4096)] == [1, 2, 1024]


def test_one_rank_mlp_equals_swiglu_and_sends_one_buffer_each_way(one_rank):
    full = _randomize(SwiGLU(H, D_FF).double(), 10)
    x, grad = _randn(B, T, H, seed=11), _randn(B, T, H, seed=12)
    y_ref, gx_ref = _backward(full, x, grad)
    tp = TensorParallelSwiGLU.from_swiglu(full)
    y, gx = _backward(tp, x, grad)
    assert _diff(y, y_ref) < ATOL and _diff(gx, gx_ref) < ATOL
    assert tp.comm.log == [("all_reduce", B * T * H, 8)] * 2


def test_wrong_width_raises_before_any_collective(one_rank):
    tp = TensorParallelSwiGLU.from_swiglu(SwiGLU(H, D_FF))
    with pytest.raises(ValueError, match="x has last dimension 7, the MLP takes 8"):
        tp(torch.ones(B, T, 7))
    assert tp.comm.log == []


def test_layers_must_share_the_mlps_counter(one_rank):
    mlp = SwiGLU(H, D_FF)
    w1 = ColumnParallelLinear.from_linear(mlp.w1)
    w3 = ColumnParallelLinear.from_linear(mlp.w3)
    w2 = RowParallelLinear.from_linear(mlp.w2, comm=w1.comm)
    with pytest.raises(ValueError, match="must share one CommCounter"):
        TensorParallelSwiGLU(w1, w3, w2)
