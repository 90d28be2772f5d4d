"""ZeRO stages 1-3 against single-process AdamW and against the paper's formulas.

Ground truth for training: ``torch.optim.AdamW`` in one process on the whole batch;
the tolerance is that of ``test_ddp`` (float32 sums in another order, ~1e-7 relative
per step). Ground truth for memory and traffic: Rajbhandari et al. 2020 ("ZeRO"),
Fig. 1 (model states per rank, (2 + 2 + K) Psi with K = 12 partitioned stage by stage)
and Sec. 7 (2 Psi elements per rank per step for stages 1-2, 3 Psi for stage 3).
Ground truth for AdamW itself: Loshchilov & Hutter 2019, "Decoupled Weight Decay
Regularization", Algorithm 2, with the global-norm clipping of Pascanu et al. 2013
(``torch.nn.utils.clip_grad_norm_``) and no decay on biases, written out by hand.
The rank side is :mod:`spawned`'s one 4-rank spawn, shared with ``test_ddp``:
N = 4 (the world) and N = 2 (the pairs [0, 2], [1, 3]).
"""

import math

import pytest
import torch
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.toy import mlp, regression_batches
from aiinfra.parallel.zero.compare import (
    ADAMW,
    MAX_GRAD_NORM,
    WIDTHS,
    train_one_process,
)
from aiinfra.parallel.zero.flat import FlatUnit, module_units
from aiinfra.parallel.zero.memory import memory_table, traffic_table, zero_traffic
from aiinfra.parallel.zero.optim import (
    clip_grad_norm_shards_,
    decay_groups,
    decay_mask,
)
from aiinfra.parallel.zero.stage1 import Zero1
from aiinfra.parallel.zero.stage2 import Zero2
from aiinfra.parallel.zero.stage3 import Zero3
from torch import nn

from tests.parallel.spawned import gloo_results

ATOL = 1e-6
GROUPS = {"world": 4, "pair": 2}  # group name -> N
# WIDTHS = (6, 7, 9, 3): units of (6 + 1) 7 = 49, (7 + 1) 9 = 72, (9 + 1) 3 = 30.
UNITS = [49, 72, 30]
# MEMORY_WIDTHS = (64, 257, 129, 11): 65 * 257, 258 * 129, 130 * 11 parameters.
MEMORY_UNITS = [65 * 257, 258 * 129, 130 * 11]  # 16705 + 33282 + 1430 = 51417


@pytest.fixture(scope="module")
def results():
    return gloo_results()


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_zero_stages_equal_single_process_adamw(results, group):
    for r in results:
        diffs = r[group]["zero"]["to_one_process"]
        assert set(diffs) == {"1", "2", "3"} | {f"{s}+accumulation" for s in "123"}
        for key, diff in diffs.items():
            assert diff < ATOL, key


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_zero_keeps_every_state_on_the_parameters_device(results, group):
    for r in results:
        assert set(map(tuple, r[group]["zero"]["devices"].values())) == {("cpu",)}


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_zero_flat_units_are_padded_to_a_multiple_of_the_world_size(results, group, n):
    units = results[0][group]["zero"]["units"]
    assert [numel for numel, _, _ in units] == UNITS
    # S = ceil(Psi_u / N): 49, 72, 30 -> N = 4: 13, 18, 8; N = 2: 25, 36, 15.
    shards = {4: [13, 18, 8], 2: [25, 36, 15]}[n]
    assert [(padded, shard) for _, padded, shard in units] == [
        (n * s, s) for s in shards
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_zero_measured_model_state_bytes_equal_the_paper_up_to_padding(
    results, group, n
):
    padded = sum(n * math.ceil(u / n) for u in MEMORY_UNITS)  # Psi_pad
    for r in results:
        for m in r[group]["zero"]["memory"]:
            stage = m["stage"]
            assert (m["psi"], m["psi_padded"]) == (sum(MEMORY_UNITS), padded)
            # Fig. 1, K = 12, at Psi_pad: stage 1 divides the 12, stage 2 also the
            # 2 of the gradients, stage 3 also the 2 of the parameters by N.
            params = 2 * padded // n if stage == 3 else 2 * padded
            grads = 2 * padded // n if stage >= 2 else 2 * padded
            assert m["bytes"] == {
                "params": params,
                "grads": grads,
                "optimizer": 12 * padded // n,
            }
            paper = zero_model_states_bytes(m["psi"], stage, n).total
            assert paper <= sum(m["bytes"].values()) <= paper + 16 * (padded - m["psi"])


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_zero_communication_is_2_psi_for_stages_1_2_and_3_psi_for_stage_3(
    results, group, n
):
    for m in results[0][group]["zero"]["memory"]:
        times = 3 if m["stage"] == 3 else 2
        assert m["paper_elements"] == times * m["psi_padded"]
        # A ring sends (N-1)/N of each buffer (Thakur et al. 2005): the paper's
        # count is its large-N limit.
        assert m["ring_elements"] * n == times * m["psi_padded"] * (n - 1)


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_zero_traffic_with_k_micro_batches_is_counted_by_the_collectives(
    results, group
):
    # Measured: the elements every collective of five steps sent, per step, over
    # Psi_pad, with k = 1 and k = 3 micro-batches per step. Stage 1 reduces once
    # per step (2), stage 2 reduce-scatters every micro-batch and all-gathers once
    # (k + 1), stage 3 gathers twice and reduce-scatters per micro-batch (3 k).
    expected = {(1, 1): 2, (1, 3): 2, (2, 1): 2, (2, 3): 4, (3, 1): 3, (3, 3): 9}
    for r in results:
        traffic = r[group]["zero"]["traffic"]
        measured = {
            (int(key[0]), int(key[-1])): value for key, value in traffic.items()
        }
        assert measured == expected
        assert all(zero_traffic(s, k) == v for (s, k), v in expected.items())


def test_traffic_table_has_k_columns_and_rejects_bad_input():
    table = traffic_table((1, 4, 16))
    assert table.rows == [
        ["DDP (no_sync)", 2, 2, 2],
        ["ZeRO-1", 2, 2, 2],
        ["ZeRO-2", 2, 5, 17],
        ["ZeRO-3", 3, 12, 48],
    ]
    for bad, match in (
        ((4, 1), "stage"),
        ((2, 0), "micro_batches"),
        ((2, 1.5), "micro"),
    ):
        with pytest.raises(ValueError, match=match):
            zero_traffic(*bad)


def test_fsdp2_shards_each_parameter_as_a_dtensor_on_dim_0():
    # FSDP2 (torch.distributed.fsdp.fully_shard) keeps each parameter as a DTensor
    # placed Shard(0) on the mesh: no flat buffer between steps, unlike our units.
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        model = mlp(WIDTHS)
        fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
        for p in model.parameters():
            assert isinstance(p, DTensor) and p.placements == (Shard(0),)
            assert p.to_local().shape == p.shape  # one rank holds all rows
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize(("group", "n"), GROUPS.items())
def test_memory_table_puts_measured_bytes_beside_the_formula(results, group, n):
    table = memory_table(results[0][group]["zero"]["memory"])
    col = {name: i for i, name in enumerate(table.columns)}
    assert [row[col["stage"]] for row in table.rows] == [1, 2, 3]
    for row in table.rows:
        assert row[col["measured (B)"]] == row[col["formula at Psi_pad (B)"]]
        assert row[col["sent / Psi_pad"]] == row[col["paper: sent / Psi"]]
    assert f"N_d = {n} gloo ranks" in table.stamp_text


@pytest.mark.parametrize("cls", [Zero1, Zero2, Zero3])
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"param_dtype": torch.int32}, "param_dtype must be a float dtype"),
        ({"lr": -1.0}, "lr must be >= 0"),
        ({"betas": (0.9, 1.0)}, "betas must be two numbers"),
        ({"weight_decay": float("nan")}, "weight_decay must be >= 0"),
    ],
)
def test_zero_rejects_bad_arguments_before_any_collective(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):  # no process group exists here
        cls(mlp(WIDTHS), **kwargs)


@pytest.mark.parametrize("cls", [Zero1, Zero2, Zero3])
def test_zero_rejects_models_without_trainable_or_with_shared_parameters(cls):
    with pytest.raises(ValueError, match="no trainable parameters"):
        cls(mlp(WIDTHS).requires_grad_(False))
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    with pytest.raises(ValueError, match="is shared"):
        cls(tied)


def test_module_units_are_the_modules_that_own_parameters():
    model = mlp(WIDTHS)
    units = module_units(model)
    assert [m for m, _ in units] == [model[0], model[2], model[4]]
    assert [sum(p.numel() for p in ps) for _, ps in units] == UNITS


def test_train_one_process_follows_adamw_algorithm_2_with_clipping():
    # AdamW by Loshchilov & Hutter's Algorithm 2, written out: decoupled decay on
    # the weight matrices only, bias-corrected moments, after scaling the gradient
    # by min(1, c / (||g|| + 1e-6)). The losses of train_one_process are recorded
    # before each step, so step t's loss shows the parameters after t - 1 updates.
    batches = regression_batches(3, 4, WIDTHS[0], WIDTHS[-1])
    lr, (b1, b2), eps, wd = (
        ADAMW["lr"],
        ADAMW["betas"],
        ADAMW["eps"],
        ADAMW["weight_decay"],
    )
    model = mlp(WIDTHS)
    params = [p.detach().clone().double() for p in model.parameters()]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    expected, expected_norms = [], []
    for t, (x, y) in enumerate(batches, start=1):
        for p, q in zip(model.parameters(), params, strict=True):
            p.data.copy_(q)  # evaluate the loss and gradient at our parameters
            p.grad = None
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        expected.append(loss.item())
        grads = [p.grad.double() for p in model.parameters()]
        norm = math.sqrt(sum((g * g).sum().item() for g in grads))
        expected_norms.append(norm)
        scale = min(1.0, MAX_GRAD_NORM / (norm + 1e-6))
        for i, (g, q) in enumerate(zip(grads, params, strict=True)):
            g = g * scale
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat, v_hat = m[i] / (1 - b1**t), v[i] / (1 - b2**t)
            decay = wd if q.dim() == 2 else 0.0  # biases are not decayed
            q.mul_(1 - lr * decay).sub_(lr * m_hat / (v_hat.sqrt() + eps))
    norms = []
    assert train_one_process(WIDTHS, batches, norms) == pytest.approx(
        expected, rel=1e-6
    )
    assert norms == pytest.approx(expected_norms, rel=1e-6)
    assert min(norms) > MAX_GRAD_NORM  # clipping acted at every step


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_zero_clipping_and_undecayed_biases_equal_adamw_groups_with_clip(
    results, group
):
    # Ground truth: torch.optim.AdamW over two groups (biases weight_decay=0) and
    # torch.nn.utils.clip_grad_norm_, one process, whole batch (spawned.py).
    for r in results:
        clip = r[group]["zero"]["clip"]
        assert clip["max_norm"] == MAX_GRAD_NORM
        reference = clip["reference_norms"]
        assert min(reference) > MAX_GRAD_NORM  # every step was clipped
        assert set(clip["diff"]) == {"1", "2", "3"}
        for stage, diff in clip["diff"].items():
            assert diff < ATOL, stage
            assert clip["norms"][stage] == pytest.approx(reference, rel=1e-6), stage


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_zero3_prefetch_equals_synchronous_and_no_reshard_sends_2_psi(results, group):
    for r in results:
        checks = r[group]["zero"]["prefetch"]
        assert len(checks) == 3
        for name, c in checks.items():
            assert c["diff"] == 0.0, name  # the same sums, bitwise
            # A gather in forward, one in backward unless kept, and a
            # reduce-scatter per micro-batch: 3 k, or 2 k Psi_pad without the
            # second gather.
            assert c["traffic"] == (3 if c["reshard"] else 2) * c["k"], name
            assert c["peak_in_flight"] == c["prefetch"], name


def test_decay_mask_marks_weights_not_biases_or_padding():
    model = mlp(WIDTHS)
    layer = model[2]  # weight 9 x 7, bias 9: 72 elements, 4 ranks: S = 18
    for rank in range(4):
        unit = FlatUnit(layer, list(layer.parameters()), rank, 4, torch.float32)
        mask = decay_mask([unit], 2, torch.device("cpu"))
        # Element e of the padded buffer is a weight iff e < 63.
        assert mask.tolist() == [18 * rank + i < 63 for i in range(18)]
        assert decay_mask([unit], 0, torch.device("cpu")).tolist() == [
            18 * rank + i < 72 for i in range(18)
        ]  # decay all: every real element, never the padding
    decay, no_decay = decay_groups(list(model.parameters()))
    assert [p.shape for p in no_decay] == [(7,), (9,), (3,)]
    assert len(decay) == 3


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_clipping_rejects_a_bad_max_norm_before_any_collective(bad):
    with pytest.raises(ValueError, match="max_grad_norm must be None or a finite"):
        Zero1(mlp(WIDTHS), max_grad_norm=bad)
    with pytest.raises(ValueError, match="max_norm must be"):
        clip_grad_norm_shards_(torch.ones(3), bad, comm=None)


@pytest.mark.parametrize("bad", [-1, 1.5, True, None])
def test_weight_decay_groups_reject_a_bad_no_decay_ndim(bad):
    with pytest.raises(ValueError, match="no_decay_ndim must be an int >= 0"):
        Zero2(mlp(WIDTHS), no_decay_ndim=bad)
    with pytest.raises(ValueError, match="no_decay_ndim"):
        decay_groups(list(mlp(WIDTHS).parameters()), bad)
    with pytest.raises(ValueError, match="no_decay_ndim"):
        decay_mask([], bad, torch.device("cpu"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prefetch": -1}, "prefetch must be an int >= 0"),
        ({"prefetch": 1.0}, "prefetch must be an int >= 0"),
        ({"prefetch": True}, "prefetch must be an int >= 0"),
        ({"reshard_after_forward": 0}, "reshard_after_forward must be a bool"),
    ],
)
def test_zero3_rejects_bad_prefetch_options_before_any_collective(kwargs, match):
    with pytest.raises(ValueError, match=match):  # no process group exists here
        Zero3(mlp(WIDTHS), **kwargs)
