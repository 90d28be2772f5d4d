"""Data x pipeline x tensor parallelism on 8 gloo ranks (2 x 2 x 2): like one process.

Ground truth: the package's Transformer in one process, float64, on the whole batch,
with the same weights and the same SGD steps. Each rank of the ``dp x pp x tp`` mesh
holds one stage's tensor-parallel shard (:class:`~aiinfra.parallel.three_d.
ThreeDParallel`); after three steps its parameters must equal the matching slices of
the reference's, and the loss the reference's loss. One spawn of 8 ranks serves every
test here; ranks fork from a server that has imported torch, so it costs about a
second.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from aiinfra.distributed import rank_device
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.pipeline.schedules import make_schedule
from aiinfra.parallel.three_d import ThreeDParallel, split_blocks
from aiinfra.plan.device_mesh import build_device_mesh, mesh_group_ranks
from aiinfra.plan.mesh import MeshLayout

from tests.parallel.spawned import value_error
from tests.shared_spawn import shared_results

CONFIG = TransformerConfig(
    vocab_size=32,
    d_model=16,
    n_layers=4,
    n_heads=4,
    n_kv_heads=2,
    d_ff=24,
    max_seq_len=8,
)
B, T, M, STEPS = 8, 8, 2, 3  # global batch B: 2 dp shares of 2 micro-batches of 2
SPLIT = {"wq": 0, "wk": 0, "wv": 0, "w1": 0, "w3": 0, "wo": 1, "w2": 1}
ATOL = 1e-12


def _model(device) -> Transformer:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(CONFIG).double().to(device)


def _batches(device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    data = torch.randint(0, CONFIG.vocab_size, (STEPS, 2, B, T), generator=g)
    return [(x.to(device), y.to(device)) for x, y in data]


def _slice(name: str, full: torch.Tensor, t: int) -> torch.Tensor:
    """The part of the full parameter ``name`` that tp rank ``t`` of 2 holds."""
    dim = SPLIT.get(name.split(".")[-2]) if name.startswith("blocks.") else None
    return full if dim is None else full.chunk(2, dim)[t]


def three_d_checks() -> dict:
    """On 8 ranks: three SGD steps of a 2 x 2 x 2 layout against one process."""
    device = rank_device()
    mesh = build_device_mesh(MeshLayout(dp=2, pp=2, tp=2))
    full = _model(device)
    ours = ThreeDParallel(full, mesh, make_schedule("1F1B", 2, M))
    out = {d: mesh_group_ranks(mesh, d) for d in ("dp", "pp", "tp")}
    out["bad p"] = value_error(
        lambda: ThreeDParallel(full, mesh, make_schedule("1F1B", 4, 4))
    )
    tokens, targets = _batches(device)[0]
    out["bad batch"] = value_error(lambda: ours.step(tokens[:3], targets[:3]))
    opts = [
        torch.optim.SGD(ps, lr=0.5) for ps in (full.parameters(), ours.parameters())
    ]
    worst = {"loss": 0.0, "params": 0.0}
    for tokens, targets in _batches(device):
        for opt in opts:
            opt.zero_grad()
        ref = F.cross_entropy(full(tokens).flatten(0, 1), targets.flatten())
        ref.backward()
        loss = ours.step(tokens, targets)
        if loss is not None:
            worst["loss"] = max(worst["loss"], abs(loss.item() - ref.item()))
        for opt in opts:
            opt.step()
    mine = {id(p) for p in ours.parameters()}
    reference = dict(full.named_parameters())
    t = dist.get_rank(mesh.get_group("tp"))
    for name, param in ours.model.named_parameters():
        if id(param) in mine:
            diff = (param - _slice(name, reference[name].detach(), t)).abs().max()
            worst["params"] = max(worst["params"], diff.item())
    out |= worst | {"held": len(mine), "last stage": loss is not None}
    return out


@pytest.fixture(scope="module")
def results() -> list[dict]:
    return shared_results(three_d_checks, 8, timeout=240)


@pytest.mark.slow
def test_eight_ranks_as_2x2x2_train_like_one_process(results):
    for rank, r in enumerate(results):
        assert r["params"] < ATOL, f"rank {rank}: {r}"
        if r["last stage"]:
            assert r["loss"] < ATOL, f"rank {rank}: {r}"
    # Only the ranks of the last stage (pp coordinate 1) compute the loss.
    assert [r["last stage"] for r in results] == [False, False, True, True] * 2


@pytest.mark.slow
def test_each_rank_talks_to_the_mesh_neighbours_of_its_dimension(results):
    # Row-major (dp, pp, tp): tp pairs consecutive, pp 2 apart, dp 4 apart.
    for rank, r in enumerate(results):
        assert r["tp"] == sorted({rank, rank ^ 1}), rank
        assert r["pp"] == sorted({rank, rank ^ 2}), rank
        assert r["dp"] == sorted({rank, rank ^ 4}), rank


@pytest.mark.slow
def test_every_rank_holds_only_its_stage_and_shard(results):
    whole = len(list(_model("cpu").parameters()))
    held = [r["held"] for r in results]
    # Two stages of two blocks; the first adds the embedding, the last norm + head.
    assert sum(held[:4:2]) == whole == sum(held[1:4:2]), held


@pytest.mark.slow
def test_a_wrong_pipeline_size_or_batch_is_refused_before_any_step(results):
    for r in results:
        assert "schedule.p = 4 must equal the mesh's pp size 2" in r["bad p"]
        assert "must be a multiple of N_d * m = 2 * 2" in r["bad batch"]


def test_only_a_transformer_is_split():
    with pytest.raises(TypeError, match="model must be a Transformer"):
        split_blocks(torch.nn.Linear(2, 2), None)
