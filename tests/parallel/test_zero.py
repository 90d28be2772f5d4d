"""ZeRO stages 1-3 against single-process AdamW and against the paper's formulas.

Ground truth for training: ``torch.optim.AdamW`` in one process on the whole batch;
the tolerance is that of ``test_ddp`` (float32 sums in another order, ~1e-7 relative
per step). Ground truth for memory and traffic: Rajbhandari et al. 2020 ("ZeRO"),
Fig. 1 (model states per rank, (2 + 2 + K) Psi with K = 12 partitioned stage by stage)
and Sec. 7 (2 Psi elements per rank per step for stages 1-2, 3 Psi for stage 3).
"""

import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import run_distributed
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.parallel.zero1 import Zero1, module_units
from aiinfra.parallel.zero2 import Zero2
from aiinfra.parallel.zero3 import Zero3
from aiinfra.parallel.zero_compare import ADAMW, STAGES, WIDTHS, train_one_process
from aiinfra.parallel.zero_memory import MEMORY_WIDTHS, measure_stages, memory_table
from torch import nn

ATOL = 1e-6
STEPS, BATCH = 5, 24


def _train(stage, batches, micro=1):
    rank, n_ranks = dist.get_rank(), dist.get_world_size()
    model = mlp(WIDTHS, seed=rank)  # different on every rank: the broadcast fixes it
    zero = STAGES[stage](model, **ADAMW)
    for x, y in batches:
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        for xm, ym in zip(x.chunk(micro), y.chunk(micro), strict=True):
            (nn.functional.mse_loss(model(xm), ym) / micro).backward()
        zero.step()
        zero.zero_grad()
    return torch.cat([p.flatten() for p in zero.full_parameters()]), zero


def _zero_checks(world_size):
    batches = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    reference = mlp(WIDTHS)
    optimizer = torch.optim.AdamW(reference.parameters(), **ADAMW)
    for x, y in batches:
        nn.functional.mse_loss(reference(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    expected = torch.cat([p.detach().flatten() for p in reference.parameters()])
    out = {"diff": {}, "units": None}
    for stage in STAGES:
        ours, zero = _train(stage, batches)
        out["diff"][stage] = (ours - expected).abs().max().item()
        out["units"] = [(u.numel, u.padded_numel, u.shard_numel) for u in zero.units]
        if stage > 1:  # gradient accumulation: 3 micro-batches before each step
            ours, _ = _train(stage, batches, micro=3)
            out["diff"][f"{stage}+accumulation"] = (ours - expected).abs().max().item()
    out["memory"] = measure_stages(MEMORY_WIDTHS)
    return out


@pytest.fixture(scope="module", params=[2, 4])
def zero_results(request):
    n = request.param
    return n, run_distributed(_zero_checks, n, n, timeout=180)


def test_zero_stages_equal_single_process_adamw(zero_results):
    world_size, results = zero_results
    assert sum(numel for numel, _, _ in results[0]["units"]) % world_size != 0
    for r in results:
        for key, diff in r["diff"].items():
            assert diff < ATOL, key


def test_zero_flat_units_are_padded_to_a_multiple_of_the_world_size(zero_results):
    world_size, results = zero_results
    for numel, padded, shard in results[0]["units"]:
        assert padded == shard * world_size and 0 <= padded - numel < world_size


def test_zero_measured_model_state_bytes_equal_the_paper_up_to_padding(zero_results):
    world_size, results = zero_results
    for r in results:
        for m in r["memory"]:
            stage, psi, padded = m["stage"], m["psi"], m["psi_padded"]
            exact = zero_model_states_bytes(padded, stage, world_size)
            assert m["bytes"] == {
                "params": exact.params, "grads": exact.grads,
                "optimizer": exact.optimizer,
            }  # fmt: skip
            paper = zero_model_states_bytes(psi, stage, world_size).total
            assert paper <= sum(m["bytes"].values()) <= paper + 16 * (padded - psi)
            assert padded - psi <= 3 * (world_size - 1)  # three units


def test_zero_communication_is_2_psi_for_stages_1_2_and_3_psi_for_stage_3(
    zero_results,
):
    world_size, results = zero_results
    for m in results[0]["memory"]:
        times = 3 if m["stage"] == 3 else 2
        assert m["paper_elements"] == times * m["psi_padded"]
        # A ring sends (N-1)/N of each buffer: the paper's count is its large-N limit.
        assert m["ring_elements"] * world_size == times * m["psi_padded"] * (
            world_size - 1
        )


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
    assert [sum(p.numel() for p in ps) for _, ps in units] == [49, 72, 30]


def test_train_one_process_is_plain_adamw():
    batches = regression_batches(2, 4, WIDTHS[0], WIDTHS[-1])
    losses = train_one_process(WIDTHS, batches)
    assert len(losses) == 2 and losses[1] < losses[0] * 10


def test_memory_table_puts_measured_bytes_beside_the_formula(zero_results):
    world_size, results = zero_results
    table = memory_table(results[0]["memory"])
    col = {name: i for i, name in enumerate(table.columns)}
    assert [row[col["stage"]] for row in table.rows] == [1, 2, 3]
    for row in table.rows:
        assert row[col["measured (B)"]] == row[col["formula at Psi_pad (B)"]]
        assert row[col["sent / Psi_pad"]] == row[col["paper: sent / Psi"]]
    assert f"N = {world_size} gloo ranks" in table.note
