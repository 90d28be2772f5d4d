"""The pipeline executor on gloo ranks against the unsplit Transformer.

Ground truth: the same weights in one :class:`~aiinfra.models.transformer.Transformer`
in one process, in float64, on the whole batch, with the loss the mean over the m
micro-batches of each one's mean cross-entropy (equal sizes: the mean over all
tokens). Every schedule must give that loss and every parameter gradient of the
rank's stages up to float64 rounding. Ground truth for the memory: the stored
micro-batches the executor counts equal the published bounds (GPipe all m; 1F1B
p - r on rank r, Narayanan et al. 2021, Sec. 2.2.1; ZB-H1 p on every rank, Qi et al.
2024, Sec. 2.1) and what :mod:`~aiinfra.parallel.pipeline.simulator` counts for the
interleaved schedule. The rank side, :func:`pipeline_checks`, runs inside
:mod:`spawned`'s one 4-rank spawn: p = 4 (the world) and p = 2 (the pairs [0, 2],
[1, 3]).
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.pipeline.executor import PipelineExecutor
from aiinfra.parallel.pipeline.schedules import make_schedule
from aiinfra.parallel.pipeline.simulator import simulate
from torch.nn import functional

from tests.parallel.spawned import gloo_results

CONFIG = TransformerConfig(
    vocab_size=32, d_model=8, n_layers=8, n_heads=2, d_ff=16, max_seq_len=8
)
M, B_MB, T = 8, 1, 4  # micro-batches, sequences per micro-batch, tokens
SCHEDULES = [("GPipe", 1), ("1F1B", 1), ("interleaved 1F1B", 2), ("ZB-H1", 1)]
GROUPS = {"world": 4, "pair": 2}
ATOL = 1e-12  # float64; sums in another order


def _model(device: torch.device) -> Transformer:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(CONFIG).double().to(device)


def _batch(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    data = torch.randint(CONFIG.vocab_size, (M * B_MB, T + 1), generator=g)
    return data[:, :-1].to(device), data[:, 1:].to(device)  # (B, T) each


def _reference(model: Transformer) -> tuple[float, dict[str, torch.Tensor]]:
    """One process, whole batch: the loss and every gradient (then cleared)."""
    tokens, targets = _batch(model.embed.weight.device)
    logits = model(tokens)  # (B, T, V)
    loss = functional.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    grads = {n: q.grad.clone() for n, q in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    return loss.item(), grads


def pipeline_checks(group: dist.ProcessGroup | None) -> dict:
    """Every schedule's loss, gradients and stored micro-batches on this rank."""
    device = rank_device(group)
    p, rank = dist.get_world_size(group), dist.get_rank(group)
    model = _model(device)  # the same weights on every rank
    ref_loss, ref = _reference(model)
    out = {}
    for name, v in SCHEDULES:
        start, cpu = time.perf_counter(), time.process_time()
        schedule = make_schedule(name, p, M, v)
        executor = PipelineExecutor(model, schedule, group)
        loss = executor.step(*_batch(device))
        diffs = [
            (q.grad - ref[n]).abs().max().item()
            for n, q in model.named_parameters()
            if q.grad is not None
        ]
        owned = sum(len(list(s.parameters())) for s in executor.stages.values())
        model.zero_grad(set_to_none=True)
        out[name] = {
            "loss": None if loss is None else abs(loss.item() - ref_loss),
            "grad": max(diffs),
            "tensors": [len(diffs), owned],
            "peak": executor.peak_saved,
            "simulated_peak": simulate(schedule).peak_in_flight[rank],
            "seconds": time.perf_counter() - start,
            "cpu": time.process_time() - cpu,
        }
    return out


@pytest.fixture(scope="module")
def results():
    return gloo_results()


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("name", [n for n, _ in SCHEDULES])
def test_pipeline_gradients_equal_the_unsplit_model(results, group, name):
    p = GROUPS[group]
    last = {r for r in range(4) if (r if group == "world" else r // 2) == p - 1}
    for rank, r in enumerate(results):
        check = r[group]["pp"][name]
        assert check["grad"] < ATOL, (rank, check)
        n_grads, owned = check["tensors"]
        assert n_grads == owned > 0  # every parameter of its stages, no other
        if rank in last:  # the rank of the last stage reports the loss
            assert check["loss"] < ATOL
        else:
            assert check["loss"] is None


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_stored_micro_batches_follow_the_schedule(results, group):
    p = GROUPS[group]
    for rank, r in enumerate(results):
        pp = r[group]["pp"]
        stage = rank if group == "world" else rank // 2
        assert pp["GPipe"]["peak"] == M  # GPipe holds every micro-batch
        assert pp["1F1B"]["peak"] == p - stage  # Narayanan et al. 2021
        assert pp["ZB-H1"]["peak"] == p  # Qi et al. 2024: all ranks at 1F1B's p
        for name, _ in SCHEDULES:
            assert pp[name]["peak"] == pp[name]["simulated_peak"], (rank, name)


@pytest.mark.slow
def test_pipeline_checks_are_cheap(results):
    # CPU seconds of each rank (wall time depends on what else the cores run).
    for r in results:
        for group in GROUPS:
            assert sum(c["cpu"] for c in r[group]["pp"].values()) < 2.0


@pytest.fixture(scope="module")
def one_rank():
    """A one-rank gloo world in this process, one intra-op thread, both undone after.

    The tensors are tiny: on a busy machine OpenMP's spinning threads make each
    small matrix product many times slower than one thread does.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("name", "v"), [("interleaved 1F1B", 2), ("ZB-H1", 1)])
def test_one_rank_holding_every_stage_equals_the_unsplit_model(one_rank, name, v):
    model = _model(torch.device("cpu"))
    ref_loss, ref = _reference(model)
    executor = PipelineExecutor(model, make_schedule(name, 1, 2, v))
    loss = executor.step(*_batch(torch.device("cpu")))  # 2 micro-batches of 4
    assert abs(loss.item() - ref_loss) < ATOL
    for n, q in model.named_parameters():
        assert (q.grad - ref[n]).abs().max().item() < ATOL, n
    assert executor.peak_saved == simulate(executor.schedule).peak_in_flight[0]


def test_bad_input_raises_before_any_transfer(one_rank):
    model = _model(torch.device("cpu"))
    with pytest.raises(ValueError, match="schedule.p = 2 must equal the group size 1"):
        PipelineExecutor(model, make_schedule("1F1B", 2, 4))
    with pytest.raises(ValueError, match="n_layers = 8 must be a multiple of p \\* v"):
        PipelineExecutor(model, make_schedule("interleaved 1F1B", 1, 3, 3))
    tied = Transformer(TransformerConfig(n_layers=2, tie_embeddings=True))
    with pytest.raises(ValueError, match="tie_embeddings must be False"):
        PipelineExecutor(tied, make_schedule("GPipe", 1, 2))
    executor = PipelineExecutor(model, make_schedule("GPipe", 1, 3))
    tokens, targets = _batch(torch.device("cpu"))  # B = 8 rows: not a multiple of 3
    with pytest.raises(ValueError, match="B a multiple of m = 3"):
        executor.step(tokens, targets)
