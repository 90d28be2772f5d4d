"""MoELayer: against a per-token loop and against transformers' own MoE blocks.

Ground truths: ``moe_loop`` (token by token over the chosen experts), transformers'
MixtralSparseMoeBlock, Qwen2MoeSparseMoeBlock, DeepseekV2Moe and DeepseekV3MoE with
the same weights copied in, and GShard's capacity counters written as a plain loop.
transformers' routers compute in fp32 whatever the input dtype, so a whole HF block
agrees with the fp64 layer to fp32 rounding (1e-6); HF's expert code given our
routing agrees to fp64 rounding (1e-12).
"""

import pytest
import torch
from aiinfra.models.moe.layer import MoELayer, moe_loop
from aiinfra.models.moe.routing import Routing, capacity_keep
from aiinfra.models.moe.spec import MoESpec

transformers = pytest.importorskip("transformers")

H = 16  # h


def layer_for(spec: MoESpec, seed: int = 0) -> MoELayer:
    torch.manual_seed(seed)
    layer = MoELayer(H, spec).double()
    with torch.no_grad():  # nn.Linear's init is small: make the router decisive
        layer.router.weight.mul_(4.0)
    return layer


def tokens(T: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, H, generator=g, dtype=torch.float64)


SPECS = {
    "mixtral": MoESpec(8, 2, 8),
    "qwen": MoESpec(
        8, 4, 8, n_shared=1, d_shared=24, shared_gate=True, norm_topk=False
    ),
    "deepseek-v2": MoESpec(
        8,
        3,
        8,
        n_shared=2,
        norm_topk=False,
        routed_scale=16.0,
        n_groups=4,
        topk_groups=2,
        group_score="max",
    ),
    "deepseek-v3": MoESpec(
        8,
        3,
        8,
        n_shared=1,
        router="sigmoid",
        routed_scale=2.5,
        n_groups=4,
        topk_groups=2,
        group_score="top2",
    ),
    "capacity": MoESpec(8, 2, 8, capacity_factor=0.75),
}


@pytest.mark.parametrize("name", SPECS)
def test_layer_equals_the_per_token_loop(name):
    layer = layer_for(SPECS[name])
    x = tokens(24)
    y = layer(x.reshape(2, 12, H))  # (B, T, h) in, same shape out
    assert y.shape == (2, 12, H)
    torch.testing.assert_close(y.reshape(24, H), moe_loop(layer, x), rtol=0, atol=1e-12)


def hf_block(name: str, spec: MoESpec):
    """transformers' MoE block for ``spec`` (tiny config) and its class name."""
    common = dict(hidden_size=H, num_experts_per_tok=spec.top_k, hidden_act="silu")
    if name == "mixtral":
        cfg = transformers.MixtralConfig(
            intermediate_size=spec.d_expert, num_local_experts=spec.n_experts, **common
        )
        from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock

        return MixtralSparseMoeBlock(cfg)
    if name == "qwen":
        cfg = transformers.Qwen2MoeConfig(
            moe_intermediate_size=spec.d_expert,
            num_experts=spec.n_experts,
            shared_expert_intermediate_size=spec.shared_width,
            norm_topk_prob=spec.norm_topk,
            **common,
        )
        from transformers.models.qwen2_moe.modeling_qwen2_moe import (
            Qwen2MoeSparseMoeBlock,
        )

        return Qwen2MoeSparseMoeBlock(cfg)
    ds = dict(
        moe_intermediate_size=spec.d_expert,
        n_routed_experts=spec.n_experts,
        n_shared_experts=spec.n_shared,
        n_group=spec.n_groups,
        topk_group=spec.topk_groups,
        routed_scaling_factor=spec.routed_scale,
        num_attention_heads=2,
        num_key_value_heads=2,
        **common,
    )
    if name == "deepseek-v2":
        cfg = transformers.DeepseekV2Config(topk_method="group_limited_greedy", **ds)
        from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Moe

        return DeepseekV2Moe(cfg)
    cfg = transformers.DeepseekV3Config(norm_topk_prob=spec.norm_topk, **ds)
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3MoE

    return DeepseekV3MoE(cfg)


def copy_into(hf, layer: MoELayer) -> None:
    """Our weights into transformers' block (gate_up_proj stacks W_1 over W_3)."""
    with torch.no_grad():
        hf.gate.weight.copy_(layer.router.weight)
        for i, e in enumerate(layer.experts):
            hf.experts.gate_up_proj[i].copy_(torch.cat([e.w1.weight, e.w3.weight]))
            hf.experts.down_proj[i].copy_(e.w2.weight)
        shared = getattr(hf, "shared_expert", None) or getattr(
            hf, "shared_experts", None
        )
        if shared is not None:
            shared.gate_proj.weight.copy_(layer.shared.w1.weight)
            shared.up_proj.weight.copy_(layer.shared.w3.weight)
            shared.down_proj.weight.copy_(layer.shared.w2.weight)
        if layer.shared_gate is not None:
            hf.shared_expert_gate.weight.copy_(layer.shared_gate.weight)
        if hasattr(hf.gate, "e_score_correction_bias"):
            hf.gate.e_score_correction_bias.copy_(layer.expert_bias)


@pytest.mark.parametrize(
    "name, biased",
    [
        ("mixtral", False),
        ("qwen", False),
        ("deepseek-v2", False),
        ("deepseek-v3", False),
        ("deepseek-v3", True),  # only V3's router has the selection bias
    ],
)
def test_layer_equals_the_transformers_block(name, biased):
    spec = SPECS[name]
    layer = layer_for(spec)
    if biased:  # a bias large enough to change the choice
        layer.expert_bias.copy_(torch.linspace(-0.3, 0.3, spec.n_experts))
    hf = hf_block(name, spec).double().eval()
    copy_into(hf, layer)
    x = tokens(20)
    with torch.no_grad():
        y = layer(x)
        _, hf_w, hf_e = hf.gate(x)  # routers in fp32, by transformers' design
        r = layer.last_routing
        # the same experts chosen, whatever order HF's unsorted top-k lists them in
        hf_e, order = hf_e.sort(-1)
        ours_e, ours_order = r.experts.sort(-1)
        assert torch.equal(ours_e, hf_e)
        w_ours = r.weights.gather(1, ours_order)
        torch.testing.assert_close(
            w_ours, hf_w.gather(1, order).double(), rtol=1e-6, atol=1e-7
        )
        # the whole block, its fp32 router included
        torch.testing.assert_close(y, hf(x[None])[0], rtol=1e-5, atol=1e-6)
        # transformers' expert code given our routing: fp64-exact
        y_hf = hf.experts(x, r.experts, r.weights)
        if layer.shared is not None:
            shared = (hf.shared_expert if name == "qwen" else hf.shared_experts)(x)
            if name == "qwen":
                shared = torch.sigmoid(hf.shared_expert_gate(x)) * shared
            y_hf = y_hf + shared
        torch.testing.assert_close(y, y_hf, rtol=0, atol=1e-12)
    if biased:  # the bias did change a choice, so the test above saw it
        unbiased = MoELayer(H, spec).double()
        unbiased.load_state_dict({**layer.state_dict(), "expert_bias": torch.zeros(8)})
        assert not torch.equal(unbiased.route(x).experts.sort(-1)[0], ours_e)


def test_group_limited_choice_stays_within_the_best_groups():
    spec = SPECS["deepseek-v3"]
    layer = layer_for(spec)
    r = layer.route(tokens(32))
    groups = r.experts // (spec.n_experts // spec.n_groups)  # (T, K)
    for t in range(32):
        assert len(set(groups[t].tolist())) <= spec.topk_groups
    # and the limit binds: unrestricted top-3 would span 3 groups for some token
    free = r.scores.topk(spec.top_k, dim=-1).indices // 2
    assert any(len(set(row.tolist())) > spec.topk_groups for row in free)


def gshard_keep(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    """GShard's Algorithm 1 as a loop: a counter per expert, first choices first."""
    T, K = experts.shape
    count = [0] * n_experts
    kept = torch.zeros(T, K, dtype=torch.bool)
    for k in range(K):
        for t in range(T):
            e = int(experts[t, k])
            kept[t, k] = count[e] < capacity
            count[e] += 1
    return kept


def test_capacity_drops_exactly_the_over_capacity_assignments():
    spec = SPECS["capacity"]
    layer = layer_for(spec)
    x = tokens(24)
    r = layer.route(x)
    C = spec.capacity(24)  # ceil(0.75 * 24 * 2 / 8) = 5
    assert C == 5
    assert torch.equal(r.kept, gshard_keep(r.experts, 8, C))
    per_expert = torch.bincount(r.experts[r.kept], minlength=8)
    assert per_expert.max() <= C and (~r.kept).any()
    # a dropped assignment contributes nothing: zero its weight, same output
    y = layer(x)
    masked = Routing(
        r.logits, r.scores, r.weights * r.kept, r.experts, torch.ones_like(r.kept)
    )
    torch.testing.assert_close(y, layer.experts_output(x, masked), rtol=0, atol=1e-12)


def test_capacity_keep_by_hand():
    # E = 2, C = 1: token 0's first choice fills expert 1; token 1's first choice
    # fills expert 0; every second choice is dropped.
    experts = torch.tensor([[1, 0], [0, 1]])
    assert capacity_keep(experts, 2, 1).tolist() == [[True, False], [True, False]]
    assert capacity_keep(experts, 2, None).all()


def test_gate_weights_norm_and_scale_by_hand():
    # One token, E = 4, logits ln 1, ln 2, ln 3, ln 4 -> softmax 0.1, 0.2, 0.3, 0.4;
    # top-2 = 0.4, 0.3; normalised 4/7, 3/7; times routed_scale 2: 8/7, 6/7.
    spec = MoESpec(4, 2, 4, routed_scale=2.0)
    layer = MoELayer(2, spec).double()
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.weight[:, 0] = torch.arange(1, 5, dtype=torch.float64).log()
    r = layer.route(torch.tensor([[1.0, 0.0]], dtype=torch.float64))
    assert r.experts.tolist() == [[3, 2]]
    want = torch.tensor([[8 / 7, 6 / 7]], dtype=torch.float64)
    torch.testing.assert_close(r.weights, want, rtol=0, atol=1e-15)


def test_bad_input_raises_named_errors():
    spec = SPECS["mixtral"]
    with pytest.raises(TypeError, match="spec"):
        MoELayer(H, {"n_experts": 8})
    with pytest.raises(ValueError, match="d_model"):
        MoELayer(0, spec)
    with pytest.raises(ValueError, match="bias_update"):
        MoELayer(H, spec, bias_update=-1.0)
    with pytest.raises(ValueError, match="shared_gate"):
        MoELayer(H, MoESpec(8, 2, 8, shared_gate=True))
    layer = MoELayer(H, spec)
    with pytest.raises(ValueError, match="d_model=16"):
        layer(torch.zeros(3, H + 1))
    with pytest.raises(TypeError, match="floating"):
        layer(torch.zeros(3, H, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\(T, h\)"):
        layer.route(torch.zeros(2, 3, H))
