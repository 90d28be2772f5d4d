"""Balancing: the two losses by hand and against transformers, the bias, a training run.

Ground truths: hand-computed values on three tokens; transformers' Mixtral
``load_balancing_loss_func`` (which divides the counts by ``T``, not ``T K``: ``K``
times ours); the sigmoid of the logits computed by hand; DeepSeek-V3's rule applied to
a load written out.
"""

import math

import pytest
import torch
from aiinfra.models.moe.balance import (
    expert_load,
    imbalance,
    load_balancing_loss,
    router_z_loss,
    sequence_balance_loss,
    update_expert_bias,
)
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.routing import Routing
from aiinfra.models.moe.spec import MoESpec
from aiinfra.models.moe.train import BalanceRunConfig, train_balance

SCORES = torch.tensor(
    [[0.5, 0.3, 0.2], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]], dtype=torch.float64
)


def hand_routing(experts: list[list[int]]) -> Routing:
    e = torch.tensor(experts)
    ones = torch.ones(e.shape, dtype=torch.float64)
    return Routing(SCORES.log(), SCORES, ones, e, torch.ones_like(e, dtype=torch.bool))


def test_switch_loss_top1_by_hand():
    # f = (2/3, 0, 1/3); P = (0.4, 0.2, 0.4); E sum f P = 3 * 0.4 = 1.2.
    loss = load_balancing_loss(hand_routing([[0], [0], [2]]), alpha=0.01)
    assert loss.item() == pytest.approx(0.012, abs=1e-15)


def test_switch_loss_top2_divides_counts_by_t_k():
    # counts (3, 2, 1) / 6 -> f = (1/2, 1/3, 1/6); sum f P = 0.2 + 0.2/3 + 0.4/6 = 1/3.
    loss = load_balancing_loss(hand_routing([[0, 1], [0, 1], [2, 0]]), alpha=1.0)
    assert loss.item() == pytest.approx(1.0, abs=1e-15)


def test_switch_loss_is_transformers_loss_over_k():
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    torch.manual_seed(0)
    layer = MoELayer(8, MoESpec(6, 3, 4))
    r = layer.route(torch.randn(20, 8))
    hf = load_balancing_loss_func((r.logits,), num_experts=6, top_k=3)
    assert transformers is not None
    torch.testing.assert_close(3 * load_balancing_loss(r, alpha=1.0), hf)


def test_sequence_wise_loss_sees_what_the_batch_loss_averages_away():
    # DeepSeek-V3 Sec. 2.1.2: the balance loss per sequence. Two sequences of two
    # tokens, E = 2, K = 1, scores (1, 0) or (0, 1) by hand: the first sends both
    # tokens to expert 0, the second both to expert 1. The batch is even:
    # f = P = (1/2, 1/2), E sum f P = 1; each sequence alone has f = P = (1, 0):
    # E sum f P = 2.
    scores = torch.tensor([[1.0, 0], [1, 0], [0, 1], [0, 1]], dtype=torch.float64)
    e = torch.tensor([[0], [0], [1], [1]])
    r = Routing(scores, scores, torch.ones(4, 1), e, torch.ones(4, 1, dtype=bool))
    assert load_balancing_loss(r, alpha=1.0).item() == pytest.approx(1.0)
    assert sequence_balance_loss(r, 2, alpha=1.0).item() == pytest.approx(2.0)
    assert sequence_balance_loss(r, 4, alpha=1.0).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="seq_len must be an int >= 1 dividing T"):
        sequence_balance_loss(r, 3)


def test_z_loss_by_hand():
    # logsumexp(0, 0) = ln 2; logsumexp(ln 3, 0) = ln 4 -> mean(ln2^2, 4 ln2^2).
    logits = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]], dtype=torch.float64)
    assert router_z_loss(logits).item() == pytest.approx(2.5 * math.log(2) ** 2, 1e-14)


@pytest.mark.parametrize("router", ["softmax", "sigmoid"])
def test_both_losses_reach_the_router(router):
    torch.manual_seed(0)
    layer = MoELayer(8, MoESpec(4, 2, 4, router=router))
    x = torch.randn(10, 8)
    for loss_of in (load_balancing_loss, lambda r: router_z_loss(r.logits)):
        (grad,) = torch.autograd.grad(loss_of(layer.route(x)), layer.router.weight)
        assert grad.abs().sum() > 0


def test_bias_moves_the_choice_but_not_the_gate_weights():
    torch.manual_seed(0)
    spec = MoESpec(4, 2, 4, router="sigmoid", routed_scale=2.5)
    layer = MoELayer(8, spec).double()
    x = torch.randn(10, 8, dtype=torch.float64)
    free = layer.route(x)
    layer.expert_bias.copy_(torch.tensor([0.0, 0.0, 5.0, 5.0]))  # forces experts 2, 3
    forced = layer.route(x)
    assert (forced.experts.sort(-1).values == torch.tensor([2, 3])).all()
    s = 1 / (1 + torch.exp(-(x @ layer.router.weight.T)))  # sigmoid by hand, (T, E)
    want = 2.5 * s[:, [2, 3]] / s[:, [2, 3]].sum(-1, keepdim=True)  # no bias in it
    torch.testing.assert_close(
        forced.weights.gather(1, forced.experts.argsort(-1)), want
    )
    # a small bias: tokens whose choice it leaves alone keep their weights exactly
    layer.expert_bias.copy_(torch.tensor([0.02, -0.02, 0.01, 0.0]))
    small = layer.route(x)
    same = (small.experts == free.experts).all(-1)
    assert same.any()
    assert torch.equal(small.weights[same], free.weights[same])


def test_bias_update_by_hand():
    bias = torch.zeros(4)
    update_expert_bias(bias, torch.tensor([4, 1, 1, 2]), gamma=0.5)  # mean 2
    assert bias.tolist() == [-0.5, 0.5, 0.5, 0.0]


def test_layer_updates_its_bias_in_training_only():
    torch.manual_seed(0)
    layer = MoELayer(8, MoESpec(4, 1, 4, router="sigmoid"), bias_update=0.1)
    x = torch.randn(16, 8)
    layer.eval()(x)
    assert (layer.expert_bias == 0).all()
    layer.train()(x)
    load = expert_load(layer.last_routing.experts, 4)
    assert layer.expert_bias.tolist() == pytest.approx(
        [(-0.1 if n > 4 else 0.1 if n < 4 else 0.0) for n in load.tolist()]
    )


def test_imbalance_by_hand():
    assert imbalance(torch.tensor([8, 0, 0, 0])) == 4.0
    assert imbalance(torch.tensor([2, 2, 2, 2])) == 1.0


def test_training_balances_with_either_method_and_not_without():
    cfg = BalanceRunConfig(steps=40, tokens=32)  # the book's run, shorter
    first, last = {}, {}
    for method in ("none", "switch", "bias"):
        ratio = train_balance(method, cfg).imbalance  # max / mean load, per step
        first[method], last[method] = ratio[0], ratio[-10:].mean()
    assert first["none"] > 3.0  # E / K = 4 if two experts took every token
    assert last["none"] > 0.9 * first["none"]  # skewed and stays so
    assert last["switch"] < 0.6 * first["switch"]
    assert last["bias"] < 0.6 * first["bias"]


def test_bad_input_raises_named_errors():
    with pytest.raises(ValueError, match="alpha"):
        load_balancing_loss(hand_routing([[0], [1], [2]]), alpha=-1.0)
    with pytest.raises(ValueError, match="logits"):
        router_z_loss(torch.zeros(3))
    with pytest.raises(ValueError, match="bias and load"):
        update_expert_bias(torch.zeros(3), torch.zeros(4))
    with pytest.raises(ValueError, match="gamma"):
        update_expert_bias(torch.zeros(3), torch.zeros(3), gamma=-1.0)
    with pytest.raises(ValueError, match="experts"):
        expert_load(torch.tensor([[3]]), 3)
    with pytest.raises(ValueError, match="load"):
        imbalance(torch.zeros(3))
    with pytest.raises(ValueError, match="method"):
        train_balance("aux")
