"""Expert parallelism against the single-process MoE layer, and its traffic.

Ground truth: :class:`~aiinfra.models.moe.layer.MoELayer` in one process, float64, on
the whole batch (every rank's tokens): its output and every parameter gradient for a
fixed random cotangent. Each rank of the expert-parallel group routes its own tokens and
holds ``E/p`` experts; its output rows, its experts' gradients and the replicated
router's and shared expert's (after the all-reduce) must equal the reference's. The
bytes are checked against a count made here from the reference routing: the assignments
whose expert lives on another rank (contiguous placement, GShard). The rank side,
:func:`expert_parallel_checks`, runs in the shared 4-rank spawn of
:mod:`tests.parallel.spawned`, on the world (p = 4) and the pairs (p = 2).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace

import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device
from aiinfra.models.expert_parallel.comm import (
    check_expert_split,
    dispatch_plan,
    expert_owner,
)
from aiinfra.models.expert_parallel.cost import (
    dispatch_bytes,
    ep_all_to_all_time,
    nodes_reached,
)
from aiinfra.models.expert_parallel.figures import bytes_table
from aiinfra.models.expert_parallel.layer import (
    ExpertParallelMoE,
    group_by_local_expert,
)
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.spec import MoESpec
from torch.distributed.device_mesh import init_device_mesh

from tests.parallel.spawned import gloo_results
from tests.parallel.spawned import value_error as _error

H, T_RANK = 16, 24  # hidden width, tokens per rank
SPECS = {  # E = 8 experts, K = 2 per token; Mixtral's routing and DeepSeek-V3's
    "mixtral": MoESpec(n_experts=8, top_k=2, d_expert=8),
    "deepseek": MoESpec(
        n_experts=8,
        top_k=2,
        d_expert=8,
        n_shared=1,
        router="sigmoid",
        routed_scale=2.5,
        n_groups=4,
        topk_groups=2,
        group_score="top2",
    ),
    "switch": MoESpec(  # top-1, capacity factor 1: some tokens are dropped
        n_experts=8, top_k=1, d_expert=8, norm_topk=False, capacity_factor=1.0
    ),
}
GROUPS = {"world": 4, "pair": 2}
GAMMA = 1e-3  # DeepSeek-V3's bias update speed
ATOL = 1e-12
MATRICES = ("w1", "w2", "w3")  # an expert's SwiGLU


def _layer(spec: MoESpec) -> MoELayer:
    with torch.random.fork_rng():
        torch.manual_seed(0)
        layer = MoELayer(H, spec).double()
        # A bias that changes the choice (DeepSeek-V3's balancing bias): every
        # rank must route with the same one.
        layer.expert_bias.copy_(0.05 * torch.randn(spec.n_experts))
    return layer


def _data(n_tokens: int, device, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x, dy = torch.randn(2, n_tokens, H, generator=g, dtype=torch.float64)
    return x.to(device), dy.to(device)


def _equivalence(group, device, spec: MoESpec) -> dict:
    """Output, gradients, bias and bytes of the EP layer against one process."""
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    E = spec.n_experts
    full = _layer(spec).to(device)
    if spec.capacity_factor is None:  # the reference runs once: the bias moves
        full.bias_update = GAMMA  # once, by the load of the whole batch
    ep = ExpertParallelMoE.from_layer(copy.deepcopy(full), group)
    x, dy = _data(p * T_RANK, device)
    shares = x.split(T_RANK)  # rank r's tokens: shares[r], (T, h)
    # The routing of each rank's tokens, before the bias moves: the count the
    # bytes must equal is the assignments kept whose expert lives elsewhere.
    with torch.no_grad():
        owner = [full.route(s).experts // (E // p) for s in shares]  # p x (T, K)
        kept = [full.route(s).kept for s in shares]
    leaving = int(((owner[rank] != rank) & kept[rank]).sum())
    served = sum(
        int(((owner[j] == rank) & kept[j]).sum()) for j in range(p) if j != rank
    )
    send = [int(((owner[rank] == j) & kept[rank]).sum()) for j in range(p)]
    # With a capacity, a batch fills the queues in order: each rank its own.
    x_all = x.clone().requires_grad_()  # the input's gradient is checked too
    if spec.capacity_factor is None:
        ref = full(x_all)  # (p T, h)
    else:
        ref = torch.cat([full(s) for s in x_all.split(T_RANK)])  # (p T, h)
    (ref * dy).sum().backward()
    mine = slice(rank * T_RANK, (rank + 1) * T_RANK)
    x_mine = x[mine].clone().requires_grad_()
    out = ep(x_mine)  # (T, h)
    (out * dy[mine]).sum().backward()
    ep.sync_gradients()
    ours = dict(ep.named_parameters())
    grads = {}
    for name, param in full.named_parameters():
        if name.startswith("experts."):
            i = int(name.split(".")[1]) - ep.first
            if not 0 <= i < len(ep.experts):
                continue  # another rank's expert
            name_here = f"experts.{i}." + name.split(".", 2)[2]
        else:
            name_here = name
        grads[name] = (ours[name_here].grad - param.grad).abs().max().item()
    return {
        "output": (out - ref[mine]).abs().max().item(),
        "input grad": (x_mine.grad - x_all.grad[mine]).abs().max().item(),
        "grads": grads,
        "bias": (ep.expert_bias - full.expert_bias).abs().max().item(),
        "bias moved": (full.expert_bias - _layer(spec).expert_bias.to(device))
        .abs()
        .max()
        .item(),
        "log": list(ep.counter.log),
        "leaving": leaving,
        "served": served,
        "send": send,
        "replicated": [q.numel() for q in ep.replicated_parameters()],
        "local experts": len(ep.experts),
    }


def _errors(group, device) -> dict:
    """Bad sizes: refused with a named error before any collective."""
    p = dist.get_world_size(group)
    out = {}
    bad = _layer(MoESpec(n_experts=9, top_k=2, d_expert=8))
    out["experts"] = _error(lambda: ExpertParallelMoE.from_layer(bad, group))
    ep = ExpertParallelMoE.from_layer(_layer(SPECS["mixtral"]).to(device), group)
    out["width"] = _error(lambda: ep(torch.zeros(T_RANK, H + 1, device=device)))
    out["log"] = list(ep.counter.log)
    out["p"] = p
    return out


def _ep_x_dp(device) -> dict:
    """One SGD step on a 2 (dp) x 2 (ep) mesh against one process on all tokens.

    Rank (d, e) holds experts [4e, 4e + 4) and routes its own 24 tokens; the
    experts are replicated over dp, the router and shared expert over both.
    """
    spec = SPECS["deepseek"]
    mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "ep"))
    dp, ep_group = mesh.get_group("dp"), mesh.get_group("ep")
    full = _layer(spec).to(device)
    ep = ExpertParallelMoE.from_layer(copy.deepcopy(full), ep_group)
    x, dy = _data(4 * T_RANK, device, seed=2)
    rank = dist.get_rank()
    mine = slice(rank * T_RANK, (rank + 1) * T_RANK)
    (full(x) * dy).sum().backward()
    (ep(x[mine]) * dy[mine]).sum().backward()
    n_logged = len(ep.counter.log)
    ep.sync_gradients(dp_group=dp)
    reduced = [op for op, _, _ in ep.counter.log[n_logged:]]
    with torch.no_grad():  # one step of plain SGD, lr 0.1, on both
        for q in [*full.parameters(), *ep.parameters()]:
            q -= 0.1 * q.grad
    ref = dict(full.named_parameters())
    worst = 0.0
    for name, param in ep.named_parameters():
        if name.startswith("experts."):
            i = int(name.split(".")[1])
            name = f"experts.{ep.first + i}." + ".".join(name.split(".")[2:])
        worst = max(worst, (param - ref[name]).abs().max().item())
    return {
        "params": worst,
        "ep ranks": sorted(dist.get_process_group_ranks(ep_group)),
        "dp ranks": sorted(dist.get_process_group_ranks(dp)),
        "ep all-reduces": len(reduced),
        "replicated tensors": len(ep.replicated_parameters()),
    }


def expert_parallel_checks(group: dist.ProcessGroup | None) -> dict:
    """Every rank-side check of this module on ``group``; plain results."""
    start = time.perf_counter()
    device = rank_device(group)
    out = {name: _equivalence(group, device, spec) for name, spec in SPECS.items()}
    out["bad"] = _errors(group, device)
    if group is None and dist.get_world_size() == 4:  # every rank builds the mesh
        out["ep x dp"] = _ep_x_dp(device)
    out["seconds"] = time.perf_counter() - start
    return out


@pytest.fixture(scope="module")
def results():
    return gloo_results()


def _expert_names(first: int, n: int) -> set[str]:
    return {f"experts.{first + i}.{w}.weight" for i in range(n) for w in MATRICES}


@pytest.mark.slow
@pytest.mark.parametrize(("group", "spec"), [(g, s) for g in GROUPS for s in SPECS])
def test_expert_parallel_layer_equals_the_single_process_layer(results, group, spec):
    p, E = GROUPS[group], SPECS[spec].n_experts
    names = {n for n, _ in _layer(SPECS[spec]).named_parameters()}
    seen = set()
    for rank, r in enumerate(results):
        found = r[group]["ep"][spec]
        assert found["output"] < ATOL and found["input grad"] < ATOL
        assert found["local experts"] == E // p
        worst = max(found["grads"], key=found["grads"].get)
        assert found["grads"][worst] < ATOL, worst
        # This rank's experts: the group rank's contiguous block of E/p.
        group_rank = rank % p if group == "world" else rank // 2
        first = group_rank * E // p
        dense = {n for n in names if not n.startswith("experts.")}
        assert set(found["grads"]) == dense | _expert_names(first, E // p)
        seen |= set(found["grads"])
    assert seen == names  # every expert lives on some rank of each group


@pytest.mark.slow
@pytest.mark.parametrize("group", GROUPS)
def test_the_bias_moves_by_the_load_of_the_whole_group(results, group):
    for r in results:
        for spec in ("mixtral", "deepseek"):  # no capacity: one reference forward
            found = r[group]["ep"][spec]
            assert found["bias"] == 0.0
            assert found["bias moved"] == pytest.approx(GAMMA)


@pytest.mark.slow
@pytest.mark.parametrize(("group", "spec"), [(g, s) for g in GROUPS for s in SPECS])
def test_bytes_per_step_are_the_remote_assignments_times_h(results, group, spec):
    p, E = GROUPS[group], SPECS[spec].n_experts
    w = 8  # float64, and int64 counts
    members = {"world": [[0, 1, 2, 3]], "pair": [[0, 2], [1, 3]]}[group]
    uneven = False
    for ranks in members:
        found = [results[i][group]["ep"][spec] for i in ranks]
        # What leaves the ranks is what the others serve: rows are conserved.
        assert sum(f["leaving"] for f in found) == sum(f["served"] for f in found)
        for f in found:
            out, back = f["leaving"] * H, f["served"] * H  # elements sent
            bias = [] if SPECS[spec].capacity_factor else [("all_reduce", E, w)]
            assert f["log"] == [
                ("all_to_all", E - E // p, w),  # counts per expert, to each rank
                ("all_to_all", out, w),  # dispatch: this rank's remote rows
                ("all_to_all", back, w),  # combine: the rows it served, back
                *bias,  # DeepSeek-V3's bias: the group's load per expert
                ("all_to_all", out, w),  # backward of the combine
                ("all_to_all", back, w),  # backward of the dispatch
                *[("all_reduce", n, w) for n in f["replicated"]],  # router, shared
            ]
            uneven |= len(set(f["send"])) > 1
    assert uneven  # the splits the router chose differ between ranks


@pytest.mark.slow
@pytest.mark.parametrize(("group", "p"), GROUPS.items())
def test_indivisible_experts_raise_before_any_collective(results, group, p):
    for r in results:
        bad = r[group]["ep"]["bad"]
        assert bad["experts"] == (
            f"n_experts = 9 must be divisible by the expert-parallel size {p}"
        )
        assert bad["width"].startswith("x must have last dimension d_model=16")
        assert bad["log"] == []


@pytest.mark.slow
def test_ep_x_dp_on_a_device_mesh_trains_like_one_process(results):
    for rank, r in enumerate(results):
        found = r["world"]["ep"]["ep x dp"]
        assert found["params"] < ATOL
        assert found["ep ranks"] == [rank // 2 * 2, rank // 2 * 2 + 1]
        assert found["dp ranks"] == [rank % 2, rank % 2 + 2]
        # Over the EP group only the replicated tensors are summed, not experts.
        assert found["ep all-reduces"] == found["replicated tensors"] == 4


def test_experts_are_placed_contiguously():
    experts = torch.tensor([[0, 7], [3, 4], [5, 2]])
    assert expert_owner(experts, 8, 4).tolist() == [[0, 3], [1, 2], [2, 1]]
    assert check_expert_split(256, 64) == 4  # DeepSeek-V3: EP64, 4 experts each
    for n_experts, p, message in [
        (8, 3, "n_experts = 8 must be divisible by the expert-parallel size 3"),
        (8, 0, "ep_size must be an int >= 1, got 0"),
        (True, 1, "n_experts must be an int >= 1, got True"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_expert_split(n_experts, p)


def test_dispatch_plan_sorts_by_expert_and_splits_by_rank():
    # 3 tokens, K = 2, E = 4 on p = 2 ranks (experts 0-1 on rank 0, 2-3 on rank 1);
    # token 1's choice of expert 0 was dropped by capacity.
    experts = torch.tensor([[3, 0], [0, 2], [1, 3]])
    kept = torch.tensor([[True, True], [False, True], [True, True]])
    plan = dispatch_plan(experts, kept, 4, 2)
    # Kept assignments by expert: 0 <- token 0; 1 <- token 2; 2 <- token 1;
    # 3 <- tokens 0 and 2 (flat slots 1, 4, 3, 0, 5).
    assert plan.order.tolist() == [1, 4, 3, 0, 5]
    assert plan.tokens.tolist() == [0, 2, 1, 0, 2]
    assert plan.counts.tolist() == [1, 1, 1, 2]
    assert plan.send == [2, 3]
    with pytest.raises(ValueError, match="experts must be"):
        dispatch_plan(experts, kept[:2], 4, 2)


def test_received_rows_are_regrouped_by_local_expert():
    # From rank 0: 1 row for local expert 0, 2 for expert 1; from rank 1: 2 and 0.
    received = torch.tensor([[1, 2], [2, 0]])
    perm, rows = group_by_local_expert(received)
    # Rows as received: [e0 (r0), e1, e1 (r0), e0, e0 (r1)] -> expert 0 first.
    assert perm.tolist() == [0, 3, 4, 1, 2]
    assert rows == [3, 2]


def test_a_layer_that_is_not_a_moe_layer_is_refused():
    with pytest.raises(TypeError, match="layer must be a MoELayer, got Linear"):
        ExpertParallelMoE(torch.nn.Linear(2, 2))


def test_uniform_dispatch_bytes_of_deepseek_v3():
    # 4096 tokens x 8 experts, 63 of 64 ranks remote, h = 7168, FP8:
    # 32768 * 63 / 64 = 32256 rows of 7168 bytes.
    assert dispatch_bytes(4096, 8, 7168, 64, 1) == 32256 * 7168
    with pytest.raises(ValueError, match="ep_size must be a finite number > 0"):
        dispatch_bytes(4096, 8, 7168, 0)


def test_all_to_all_across_nodes_prices_remote_blocks_on_the_nic():
    # p = 16 over nodes of 8, 1 MB per peer: 7 steps over the H100's NVLink 4 (900
    # GB/s both ways in its datasheet, 450 GB/s each way) of 1 us + 1 MB / 450 GB/s,
    # and 8 NIC steps of 5 us + 1 MB / 50 GB/s = 25 us.
    nvlink = 1e-6 + 1e6 / 450e9
    assert ep_all_to_all_time(16e6, 16) == pytest.approx(7 * nvlink + 8 * 25e-6)
    # Inside one node: p - 1 NVLink steps only.
    assert ep_all_to_all_time(8e6, 8) == pytest.approx(7 * nvlink)
    with pytest.raises(ValueError, match="local_size \\(8\\) must divide p \\(12\\)"):
        ep_all_to_all_time(1e6, 12)


def test_node_limited_routing_reaches_at_most_m_nodes():
    spec = MoESpec(
        n_experts=64,
        top_k=6,
        d_expert=1,
        router="sigmoid",
        n_groups=8,
        topk_groups=8,
        group_score="top2",
    )
    g = torch.Generator().manual_seed(0)
    free = nodes_reached(spec, 8, tokens=2000, generator=g)
    # Without a limit the K experts are a uniform random K-subset: a node is
    # missed with probability C(56, 6) / C(64, 6); a remote expert: 7/8 of K.
    miss = math.comb(56, 6) / math.comb(64, 6)
    assert free["nodes"] == pytest.approx(8 * (1 - miss), abs=0.1)
    assert free["remote experts"] == pytest.approx(6 * 7 / 8, abs=0.1)
    assert free["max nodes"] == 6
    limited = nodes_reached(replace(spec, topk_groups=3), 8, 2000, g)
    assert limited["max nodes"] == 3
    assert limited["remote nodes"] < free["remote nodes"]
    with pytest.raises(ValueError, match="n_nodes \\(7\\) must divide n_experts"):
        nodes_reached(spec, 7)


def test_the_byte_table_conserves_rows_and_prices_them():
    table = bytes_table(SPECS["mixtral"], H, T_RANK, 4, 8)
    out, back = zip(*[(row[2], row[3]) for row in table.rows], strict=True)
    assert sum(out) == sum(back)  # what leaves one rank is served by another
    assert all(row[4] == row[2] * H * 8 for row in table.rows)
    assert {row[6] for row in table.rows} == {24 * 2 * 3 // 4 * H * 8}
