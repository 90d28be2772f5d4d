"""The one-process simulation of the tensor-parallel MLP, and the cost model.

Ground truth: the unsplit :class:`~aiinfra.models.layers.SwiGLU` (float64) and
Megatron-LM's count of collectives per layer (FACTS.md), the latter also checked
on real ranks in ``test_tensor_parallel_model``.
"""

from __future__ import annotations

import pytest
import torch
from aiinfra.comm import cost
from aiinfra.models.layers import SwiGLU
from aiinfra.models.presets import preset
from aiinfra.parallel.tensor.cost import layer_cost, layer_flops, layer_traffic
from aiinfra.parallel.tensor.steps import mlp_steps, mlp_steps_frames


def _mlp_and_input() -> tuple[SwiGLU, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    mlp = SwiGLU(8, 16, bias=True).double()
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    return mlp, torch.randn(2, 3, 8, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("p", [1, 2, 4, 8])
def test_the_simulated_ranks_end_with_the_unsplit_output(p):
    mlp, x = _mlp_and_input()
    steps = mlp_steps(mlp, x, p)
    expected = mlp(x)
    assert [len(s.held) for s in steps] == [p] * 5
    for held in steps[-1].held:  # every rank holds the whole output after g
        torch.testing.assert_close(held, expected, rtol=0, atol=1e-12)
    # Column parallel: the ranks' slices side by side are the full projection.
    torch.testing.assert_close(torch.cat(steps[1].held, -1), mlp.w1(x))
    # Row parallel: the partials add up to the output less the bias (added once).
    partial_sum = sum(steps[3].held[1:], steps[3].held[0])
    torch.testing.assert_close(partial_sum + mlp.w2.bias, expected)
    assert [s.communication for s in steps] == ["", "", "", "", "all-reduce"]


def test_one_frame_per_step():
    mlp, x = _mlp_and_input()
    frames = mlp_steps_frames(mlp_steps(mlp, x, 4))
    assert len(frames) == 5
    assert all(len(f.axes) == 4 for f in frames)  # a panel per rank


@pytest.mark.parametrize(
    ("p", "message"), [(3, "d_ff 16 must be divisible"), (0, "p must")]
)
def test_bad_rank_counts_are_refused(p, message):
    mlp, x = _mlp_and_input()
    with pytest.raises(ValueError, match=message):
        mlp_steps(mlp, x, p)


def test_traffic_per_layer_is_megatrons_count():
    assert layer_traffic(1) == layer_traffic(1, sp=True) == []
    assert layer_traffic(8) == [("all_reduce", 1.0)] * 4
    # Megatron-LM with sequence parallelism: per layer the 4 all-reduces become 4
    # all-gathers + 4 reduce-scatters, and the backward of each column-parallel
    # matmul (fused QKV, fc1) all-gathers its saved input shard again
    # (LinearWithGradAccumulationAndAsyncCommunication.backward): 6 + 4.
    sp = layer_traffic(8, sp=True)
    assert sorted(op for op, _ in sp) == ["all_gather"] * 6 + ["reduce_scatter"] * 4
    with pytest.raises(ValueError, match="p must be an integer >= 1"):
        layer_traffic(0)


def test_layer_flops_match_six_psi_per_token_plus_attention():
    # 6 x the weights per token (Kaplan) plus 12 T h for the scores (PaLM); the
    # weights of a Llama 3 8B layer counted by hand: q, o (4096^2 each), k, v
    # (4096 x 1024 each), three 4096 x 14336 MLP matrices.
    c = preset("llama-3-8b")
    weights = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336
    assert layer_flops(c, tokens=1, seq=8192) == 6 * weights + 12 * 8192 * 4096


def test_the_communication_share_grows_with_p_and_with_a_slower_link():
    c = preset("llama-3-70b")
    share = {
        (p, link): layer_cost(c, p, 8192, 8192, 989e12, link).comm_share
        for p in (2, 8, 32)
        for link in ("nvlink", "ib400")
    }
    assert share[2, "nvlink"] < share[8, "nvlink"] < share[32, "nvlink"]
    assert all(share[p, "nvlink"] < share[p, "ib400"] for p in (2, 8, 32))
    one = layer_cost(c, 8, 8192, 8192, 989e12, "nvlink")
    n = 8192 * 8192 * 2  # b T h bf16 bytes
    assert one.communication == pytest.approx(
        4 * cost.ring_all_reduce_time(n, 8, "nvlink")
    )
    with pytest.raises(ValueError, match="tokens must be > 0"):
        layer_cost(c, 8, 0, 8192, 989e12, "nvlink")
