"""A whole Transformer under a tensor-parallel plan, ours and PyTorch's.

Ground truth: the package's :class:`~aiinfra.models.transformer.Transformer` in one
process, float64, with the same weights: its mean cross-entropy and every parameter
gradient (rank r's shard of each split one). The traffic is checked against
Megatron-LM's count (Shoeybi et al. 2019, Fig. 4; FACTS.md "Tensor parallelism"): a
layer runs 4 all-reduces of the ``b T h`` activations (2 forward ``g``, 2 backward
``f``); with sequence parallelism (Korthikanti et al. 2022) each becomes an all-gather
and a reduce-scatter of the same buffer, and, as in Megatron-LM, backward gathers
the saved input shards of the QKV and MLP input matmuls once more. The same plan
applied by
``torch.distributed.tensor.parallel.parallelize_module`` must give the same loss and
gradients. The rank side, :func:`tensor_parallel_model_checks`, runs in
:mod:`spawned`'s shared 4-rank spawn, on the world (p = 4) and the pairs (p = 2).
"""

from __future__ import annotations

import copy
import time

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from aiinfra.distributed import rank_device
from aiinfra.memory.measure import SavedTensorLog
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.tensor.attention import check_heads
from aiinfra.parallel.tensor.cost import layer_traffic
from aiinfra.parallel.tensor.dtensor import parallelize_with_torch
from aiinfra.parallel.tensor.model import (
    MEGATRON_PLAN,
    SEQUENCE_PARALLEL_PLAN,
    TensorParallelTransformer,
    check_plan,
    resolve_plan,
)
from aiinfra.parallel.tensor.ops import split_sequence
from aiinfra.parallel.tensor.vocab import vocab_range
from aiinfra.plan.device_mesh import build_device_mesh, mesh_group_ranks
from aiinfra.plan.mesh import MeshLayout
from torch.distributed.tensor.parallel import loss_parallel

from tests.parallel.spawned import gloo_results
from tests.parallel.spawned import value_error as _error

B, T = 2, 8
CONFIG = {  # H = 8 query heads sharing G = 4 KV heads (GQA); d = 4, h = 32
    "vocab_size": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 8,
    "n_kv_heads": 4,
    "d_ff": 24,
    "max_seq_len": T,
}
PLANS = {"tp": MEGATRON_PLAN, "tp+sp": SEQUENCE_PARALLEL_PLAN}
GROUPS = {"world": 4, "pair": 2}
ATOL = 1e-12
# The dimension along which each full parameter is split (None: replicated).
SPLIT = {"embed": 0, "wq": 0, "wk": 0, "wv": 0, "w1": 0, "w3": 0, "head": 0}
SPLIT |= {"wo": 1, "w2": 1}


def _model(config: dict) -> Transformer:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return Transformer(TransformerConfig(**config)).double()


def _data(device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    tokens, targets = torch.randint(0, CONFIG["vocab_size"], (2, B, T), generator=g)
    return tokens.to(device), targets.to(device)


def _reference(device):
    full = _model(CONFIG).to(device)
    tokens, targets = _data(device)
    logits = full(tokens)  # (B, T, V)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
    return full, tokens, targets, loss.item()


def _shard(full_name: str, grad: torch.Tensor, rank: int, p: int) -> torch.Tensor:
    leaf = full_name.split(".")[-2]
    dim = SPLIT.get(leaf)
    return grad if dim is None else grad.chunk(p, dim)[rank]


def _ours_by_full_name(tp: TensorParallelTransformer) -> dict[str, torch.Tensor]:
    out = {"embed.weight": tp.embed.weight, "head.weight": tp.head_weight}
    for name, param in tp.named_parameters():
        if name.startswith(("blocks.", "norm.")):
            out[name] = param
    return out


def _model_checks(group, device, plan: str) -> dict:
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    full, tokens, targets, ref_loss = _reference(device)
    tp = TensorParallelTransformer(full, PLANS[plan], group)
    logits_shape = list(tp(tokens).shape)
    for c in [tp.comm, *(b.comm for b in tp.blocks)]:
        c.reset()
    loss = tp(tokens, targets)
    loss.backward()
    sync = tp.sync_sequence_parallel_grads()
    ours = _ours_by_full_name(tp)
    grads = {
        name: (ours[name].grad - _shard(name, param.grad, rank, p)).abs().max().item()
        for name, param in full.named_parameters()
    }
    layers = [list(b.comm.log) for b in tp.blocks]
    attn = tp.blocks[0].attn
    x = torch.randn(B, T, CONFIG["d_model"], dtype=torch.float64, device=device)
    x = split_sequence(x, attn.comm).clone() if tp.sequence_parallel else x
    with SavedTensorLog([*attn.parameters(), *attn.buffers()]) as saved:
        attn(x.requires_grad_())
    return {
        "loss": abs(loss.item() - ref_loss),
        "grads": grads,
        "attn saved": saved.total_bytes,
        "logits_shape": logits_shape,
        "layers": layers,
        "outer": list(tp.comm.log),
        "sync": list(sync.log),
    }


def _torch_checks(group, device, plan: str) -> dict:
    full, tokens, targets, ref_loss = _reference(device)
    model = parallelize_with_torch(copy.deepcopy(full), PLANS[plan], group)
    with loss_parallel():
        logits = model(tokens)  # a DTensor, sharded along the vocabulary
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        loss.backward()
    grads = {}
    for (name, ref), (_, param) in zip(
        full.named_parameters(), model.named_parameters(), strict=True
    ):
        grad = param.grad  # a DTensor where the plan split it: gather it whole
        grad = grad.full_tensor() if hasattr(grad, "full_tensor") else grad
        grads[name] = (grad - ref.grad).abs().max().item()
    return {"loss": abs(loss.item() - ref_loss), "grads": grads}


def _error_checks(group, device) -> dict:
    """Sizes a group of 2 or 4 cannot split: errors, and no collective issued."""
    p = dist.get_world_size(group)
    bad_heads = _model(CONFIG | {"n_heads": 6, "n_kv_heads": 6, "d_model": 24})
    bad_vocab = _model(CONFIG | {"vocab_size": 30 if p == 4 else 31})
    out = {
        "heads": _error(lambda: TensorParallelTransformer(bad_heads, group=group)),
        "vocab": _error(lambda: TensorParallelTransformer(bad_vocab, group=group)),
        "torch heads": _error(
            lambda: parallelize_with_torch(bad_heads, MEGATRON_PLAN, group)
        ),
    }
    if p > 1:  # one rank splits any length: the forward would just run
        model = _model(CONFIG).to(device)
        tp = TensorParallelTransformer(model, SEQUENCE_PARALLEL_PLAN, group)
        tokens = torch.zeros(B, T + 1, dtype=torch.long, device=device)
        out["sequence"] = _error(lambda: tp(tokens))
        out["log"] = list(tp.comm.log) + [e for b in tp.blocks for e in b.comm.log]
    return out


def _dp_tp_training(device) -> dict:
    """Three SGD steps of the Transformer on a 2 (dp) x 2 (tp) device mesh.

    Rank (d, t) holds TP shard t of the model and trains on batch half d; the
    gradients are averaged over the dp group. Ground truth: one process on the
    whole batch. Returns the largest difference of the losses and parameters.
    """
    mesh = build_device_mesh(MeshLayout(dp=2, tp=2))
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    d, t = dist.get_rank(dp), dist.get_rank(tp)
    full = _model(CONFIG).to(device)
    ours = TensorParallelTransformer(copy.deepcopy(full), MEGATRON_PLAN, tp)
    opts = [torch.optim.SGD(m.parameters(), lr=0.5) for m in (full, ours)]
    g = torch.Generator().manual_seed(2)
    worst = {"loss": 0.0, "params": 0.0}
    for _ in range(3):
        tokens, targets = torch.randint(
            0, CONFIG["vocab_size"], (2, 2 * B, T), generator=g
        )
        tokens, targets = tokens.to(device), targets.to(device)
        for opt in opts:
            opt.zero_grad()
        ref = F.cross_entropy(full(tokens).flatten(0, 1), targets.flatten())
        ref.backward()
        half = slice(d * B, (d + 1) * B)
        loss = ours(tokens[half], targets[half])
        loss.backward()
        for param in ours.parameters():  # the mean over the dp group
            dist.all_reduce(param.grad, group=dp)
            param.grad /= 2
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, group=dp)
        worst["loss"] = max(worst["loss"], abs(mean_loss.item() / 2 - ref.item()))
        for opt in opts:
            opt.step()
    mine = _ours_by_full_name(ours)
    for name, param in full.named_parameters():
        diff = (mine[name] - _shard(name, param, t, 2)).abs().max().item()
        worst["params"] = max(worst["params"], diff)
    return worst | {"dp ranks": mesh_group_ranks(mesh, "dp")}


def tensor_parallel_model_checks(group: dist.ProcessGroup | None) -> dict:
    """Every check of this module on ``group``, run on its ranks; plain results."""
    start = time.perf_counter()
    device = rank_device(group)
    out = {plan: _model_checks(group, device, plan) for plan in PLANS}
    if group is None:  # PyTorch's DTensor path: on the world only (seconds each)
        out |= {f"torch {plan}": _torch_checks(group, device, plan) for plan in PLANS}
    out["bad"] = _error_checks(group, device)
    if group is None and dist.get_world_size() == 4:  # every rank builds the mesh
        out["dp x tp"] = _dp_tp_training(device)
    out["seconds"] = time.perf_counter() - start
    return out


@pytest.fixture(scope="module")
def results():
    return gloo_results()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("group", "plan"),
    [(g, p) for g in GROUPS for p in ("tp", "tp+sp")]
    + [("world", "torch tp"), ("world", "torch tp+sp")],
)
def test_sharded_transformer_equals_the_full_model(results, group, plan):
    names = {n for n, _ in _model(CONFIG).named_parameters()}
    for r in results:
        found = r[group]["tpm"][plan]
        assert found["loss"] < ATOL
        assert set(found["grads"]) == names  # every parameter, none skipped
        worst = max(found["grads"], key=found["grads"].get)
        assert found["grads"][worst] < ATOL, worst


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_sequence_parallel_attention_saves_the_input_shard(results, group, p):
    # Everything after the projections is the same per rank (its heads, all
    # positions); the only difference counted by hand is the saved input of the
    # QKV projections: b T h float64 under TP, its shard b T h / p under SP.
    bth = B * T * CONFIG["d_model"]
    for r in results:
        tp, sp = r[group]["tpm"]["tp"], r[group]["tpm"]["tp+sp"]
        assert tp["attn saved"] - sp["attn saved"] == 8 * (bth - bth // p)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_no_rank_holds_the_full_logits(results, group, p):
    for r in results:
        for plan in PLANS:
            assert r[group]["tpm"][plan]["logits_shape"] == [B, T, 32 // p]


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_each_layer_sends_megatrons_four_all_reduces(results, group):
    bth = B * T * CONFIG["d_model"]
    for r in results:
        plain, sp = r[group]["tpm"]["tp"], r[group]["tpm"]["tp+sp"]
        for layer in plain["layers"]:  # g, g forward; f (MLP), f (attention) back
            assert layer == [("all_reduce", bth, 8)] * 4
        # Each all-reduce -> all-gather + reduce-scatter, and backward gathers the
        # saved input shard of QKV and of w1/w3 again (Megatron's
        # LinearWithGradAccumulationAndAsyncCommunication): forward AG, RS per
        # block; backward per block (MLP first) the RS's AG, the re-gather, the RS.
        ag, rs = ("all_gather", bth, 8), ("reduce_scatter", bth, 8)
        for layer in sp["layers"]:
            assert layer == [ag, rs] * 2 + [ag, ag, rs] * 2
        # The book's traffic table (the cost model) lists the same operations.
        p = GROUPS[group]
        for found, sp_ in ((plain, False), (sp, True)):
            assert sorted(op for op, _, _ in found["layers"][0]) == sorted(
                op for op, _ in layer_traffic(p, sp_)
            )
        # Outside the layers: the embedding's g, the loss's three sums of one
        # number per token (max, target logit, sum of exponentials), the head's f.
        bt = B * T
        assert plain["outer"] == [("all_reduce", bth, 8)] + [
            ("all_reduce", bt, 8)
        ] * 3 + [("all_reduce", bth, 8)]
        assert sp["outer"] == [("reduce_scatter", bth, 8), ("all_gather", bth, 8)] + [
            ("all_reduce", bt, 8)
        ] * 3 + [("reduce_scatter", bth, 8), ("all_gather", bth, 8)]
        # Sequence parallelism also sums the norms' gradients: 2 per layer + final.
        n_norms = 2 * CONFIG["n_layers"] + 1
        assert sp["sync"] == [("all_reduce", CONFIG["d_model"], 8)] * n_norms
        assert plain["sync"] == []


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_indivisible_heads_and_vocabulary_raise_before_any_collective(
    results, group, p
):
    for r in results:
        bad = r[group]["tpm"]["bad"]
        assert bad["log"] == []
        heads = f"n_heads = 6 must be divisible by the tensor-parallel size {p}"
        assert bad["heads"].startswith(heads) if p == 4 else bad["heads"] is None
        assert bad["torch heads"] == bad["heads"]
        V = 30 if p == 4 else 31
        assert bad["vocab"] == (
            f"vocab_size {V} must be divisible by the tensor-parallel size {p}"
        )
        assert bad["sequence"] == (
            f"sequence length {T + 1} must be divisible by the tensor-parallel size {p}"
        )


def test_the_plan_names_modules_of_the_model():
    model = _model(CONFIG)
    styles = resolve_plan(model, MEGATRON_PLAN)
    assert styles["blocks.1.attn.wk"] == "colwise"
    assert styles["blocks.0.mlp.w2"] == "rowwise"
    assert len(styles) == 2 + 7 * CONFIG["n_layers"]
    assert check_plan(model, MEGATRON_PLAN) is False
    assert check_plan(model, SEQUENCE_PARALLEL_PLAN) is True


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"head": "colwise"}, "plan must give 'head' the style 'vocab'"),
        ({"blocks.*.attn.wo": "colwise"}, "'blocks.0.attn.wo' the style 'rowwise'"),
        ({"blocks.*.mlp_norm": "sequence"}, "every norm along the sequence, or none"),
        ({"blocks.*.attn.wz": "colwise"}, "'blocks.*.attn.wz' matches no module"),
        ({"embed": "diagonal"}, "style must be one of"),
    ],
)
def test_a_plan_that_does_not_fit_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        check_plan(_model(CONFIG), MEGATRON_PLAN | change)


def test_only_llama_family_models_are_split():
    gpt = _model(CONFIG | {"mlp": "gelu", "position": "learned", "norm": "layernorm"})
    with pytest.raises(ValueError, match="model must use GQA attention, a SwiGLU"):
        check_plan(gpt, MEGATRON_PLAN)
    with pytest.raises(TypeError, match="model must be an aiinfra Transformer, got"):
        TensorParallelTransformer(torch.nn.Linear(4, 4), MEGATRON_PLAN)
    with pytest.raises(TypeError, match="plan must be a dict, got list"):
        check_plan(_model(CONFIG), list(MEGATRON_PLAN))


def test_heads_and_vocabulary_split_only_when_divisible():
    check_heads(32, 8, 8)  # Llama 3 70B on a node of 8: 4 query heads, 1 KV head
    with pytest.raises(ValueError, match="n_kv_heads = 8 must be divisible by .* 16"):
        check_heads(64, 8, 16)
    assert vocab_range(128256, 3, 8) == (48096, 64128)
    with pytest.raises(ValueError, match="vocab_size 50257 must be divisible"):
        vocab_range(50257, 0, 2)  # Megatron pads V to a multiple of 128 p


@pytest.mark.slow
def test_dp_x_tp_on_a_device_mesh_trains_like_one_process():
    # 4 ranks as 2 (data) x 2 (tensor): TP inside consecutive pairs, DP across.
    for rank, r in enumerate(gloo_results()):
        found = r["world"]["tpm"]["dp x tp"]
        assert found["loss"] < ATOL and found["params"] < ATOL
        assert found["dp ranks"] == [rank % 2, rank % 2 + 2]
