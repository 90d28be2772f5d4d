"""The grouped expert computation: equal to the per-token loop; the bench command runs.

Ground truth: ``moe_loop`` (token by token over the kept experts). No timing is
asserted; the command is only run on a tiny shape.
"""

import json

import pytest
import torch
from aiinfra.models.moe.bench import MoEBenchConfig
from aiinfra.models.moe.grouped import GroupedMoELayer, sort_by_expert
from aiinfra.models.moe.layer import MoELayer, moe_loop
from aiinfra.models.moe.spec import MoESpec

H = 16  # h

SPECS = {
    "top-2": MoESpec(8, 2, 8),
    "shared, groups, capacity": MoESpec(
        8,
        3,
        8,
        n_shared=1,
        router="sigmoid",
        n_groups=4,
        topk_groups=2,
        group_score="top2",
        capacity_factor=0.5,
    ),
}


def pair(spec: MoESpec, **kwargs) -> tuple[MoELayer, GroupedMoELayer]:
    torch.manual_seed(0)
    layer = MoELayer(H, spec)
    grouped = GroupedMoELayer(H, spec, **kwargs)
    grouped.load_state_dict(layer.state_dict())
    return layer, grouped


@pytest.mark.parametrize("name", SPECS)
def test_grouped_equals_the_per_token_loop(name):
    layer, grouped = pair(SPECS[name])
    layer, grouped = layer.double(), grouped.double()
    x = torch.randn(29, H, dtype=torch.float64)  # an odd T
    torch.testing.assert_close(grouped(x), moe_loop(layer, x), rtol=0, atol=1e-12)


def test_grouped_gradients_equal_the_masked_loop():
    layer, grouped = pair(SPECS["top-2"])
    layer, grouped = layer.double(), grouped.double()
    x = torch.randn(12, H, dtype=torch.float64)
    layer(x).square().sum().backward()
    grouped(x).square().sum().backward()
    pairs = zip(layer.named_parameters(), grouped.parameters(), strict=True)
    for (name, a), b in pairs:
        torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=1e-12, msg=name)


def test_grouped_mm_path_equals_the_loop_in_fp32():
    layer, grouped = pair(SPECS["shared, groups, capacity"], grouped_mm=True)
    x = torch.randn(29, H)
    # fp32: the plain loop's own error against fp64 sets the bound
    with torch.no_grad():
        ref = moe_loop(layer.double(), x.double())
        err_loop = (moe_loop(layer.float(), x) - ref).abs().max()
        err = (grouped(x) - ref).abs().max()
    assert err <= 2 * err_loop + 1e-6
    with pytest.raises(TypeError, match="x must be one of"):
        grouped.double()(x.double())


def test_sort_by_expert_by_hand():
    # T = 3, K = 2; token 1's second choice dropped.
    layer = MoELayer(H, MoESpec(3, 2, 4))
    r = layer.route(torch.randn(3, H))
    r.experts = torch.tensor([[2, 0], [0, 1], [2, 1]])
    r.weights = torch.tensor([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]])
    r.kept = torch.tensor([[True, True], [True, False], [True, True]])
    token, weight, counts = sort_by_expert(r)
    assert token.tolist() == [0, 1, 2, 0, 2]  # expert 0: t0, t1; 1: t2; 2: t0, t2
    assert weight.tolist() == pytest.approx([0.2, 0.3, 0.6, 0.1, 0.5])
    assert counts.tolist() == [2, 1, 2]


def test_bench_command_writes_a_stamped_table(tmp_path, capsys):
    from aiinfra import cli

    out = tmp_path / "moe.json"
    tiny = "--tokens 8 --d-model 8 --experts 4 --top-k 2 --d-expert 4 --repeats 1"
    assert cli.main(["bench", "moe", *tiny.split(), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    impls = {r["impl"] for r in res["rows"]}
    assert {"token loop", "masked per expert", "grouped"} <= impls
    assert res["stamp"]["cpu_count"] >= 1
    assert "speed-up over masked" in capsys.readouterr().out


def test_bench_config_rejects_bad_sizes():
    with pytest.raises(ValueError, match="tokens"):
        MoEBenchConfig(tokens=())
    with pytest.raises(ValueError, match="n_experts"):
        MoEBenchConfig(n_experts=0)
