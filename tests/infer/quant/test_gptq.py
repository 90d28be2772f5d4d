"""GPTQ: least-squares ground truth, equality with RTN under an identity Hessian."""

from __future__ import annotations

import pytest
import torch
from aiinfra.infer.quant.gptq import gptq_hessian, gptq_quantize
from aiinfra.infer.quant.rtn import dequantize, quantize


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _correlated_inputs(n: int, d_in: int, rank: int, seed: int = 0) -> torch.Tensor:
    """Inputs ``(n, d_in)`` that mostly live in a ``rank``-dim subspace."""
    g = _gen(seed)
    z = torch.randn(n, rank, generator=g, dtype=torch.float64)
    mix = torch.randn(rank, d_in, generator=g, dtype=torch.float64)
    return z @ mix + 0.05 * torch.randn(n, d_in, generator=g, dtype=torch.float64)


def _output_error(x: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor) -> float:
    return float((x @ w.T - x @ w_hat.T).norm())


def test_hessian_is_twice_the_input_gram_matrix() -> None:
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    # X^T X = [[1 + 9, 2 - 3], [2 - 3, 4 + 1]] = [[10, -1], [-1, 5]].
    assert gptq_hessian(x).tolist() == [[20.0, -2.0], [-2.0, 10.0]]


@pytest.mark.parametrize(("scheme", "group_size"), [("absmax", None), ("zeropoint", 4)])
def test_identity_hessian_gives_round_to_nearest(
    scheme: str, group_size: int | None
) -> None:
    # With H = c I the inverse's Cholesky factor is diagonal: no error is fed
    # forward and every column is rounded on RTN's grid.
    w = torch.randn(6, 8, generator=_gen(1))
    got = gptq_quantize(w, 2 * torch.eye(8), 4, scheme, group_size, block_size=3)
    gran = "channel" if group_size is None else "group"
    want = quantize(w, 4, scheme, gran, group_size)
    assert torch.equal(got.q, want.q)
    assert torch.allclose(got.scale, want.scale)
    assert torch.equal(dequantize(got), dequantize(want))


def test_update_after_one_column_is_the_least_squares_fit() -> None:
    # One output, three inputs, no damping. After column 1 is rounded to q_1, the
    # best remaining weights solve min ||X w - X[:, 0] q_1 - X[:, 1:] v|| (least
    # squares, Optimal Brain Surgeon's compensation); GPTQ must round v_1 next.
    x = _correlated_inputs(64, 3, 1, seed=2)
    w = torch.tensor([[0.25, -0.264, 0.52]], dtype=torch.float64)
    qt = gptq_quantize(w, gptq_hessian(x), 4, "absmax", percdamp=0.0)
    scale = 0.52 / 7  # the row's absmax grid
    assert qt.scale[0, 0].item() == pytest.approx(scale)
    q1 = round(0.25 / scale) * scale
    target = x @ w[0] - x[:, 0] * q1  # (N,): what columns 2 and 3 must explain
    v = torch.linalg.lstsq(x[:, 1:], target[:, None]).solution[:, 0]  # (2,)
    w_hat = dequantize(qt)[0]
    assert w_hat[0].item() == pytest.approx(q1)
    assert w_hat[1].item() == pytest.approx(round(v[0].item() / scale) * scale)
    # The compensation moved column 2 across a rounding boundary (-3.55 -> -3.40).
    assert round(v[0].item() / scale) != round(-0.264 / scale)


@pytest.mark.parametrize("group_size", [None, 8])
def test_gptq_output_error_below_rtn_on_correlated_inputs(
    group_size: int | None,
) -> None:
    x = _correlated_inputs(256, 32, 6)
    w = torch.randn(16, 32, generator=_gen(3), dtype=torch.float64)
    gran = "channel" if group_size is None else "group"
    rtn = dequantize(quantize(w, 4, "zeropoint", gran, group_size)).double()
    gptq = dequantize(gptq_quantize(w, gptq_hessian(x), 4, "zeropoint", group_size))
    ratio = _output_error(x, w, gptq.double()) / _output_error(x, w, rtn)
    assert ratio < 0.7  # measured: 0.37 per row, 0.50 with groups of 8


def test_lazy_blocks_change_nothing() -> None:
    x = _correlated_inputs(128, 24, 4, seed=4)
    w = torch.randn(8, 24, generator=_gen(5))
    H = gptq_hessian(x)
    one = gptq_quantize(w, H, 4, "zeropoint", 8, block_size=1)
    lazy = gptq_quantize(w, H, 4, "zeropoint", 8, block_size=10)  # crosses groups
    assert torch.equal(one.q, lazy.q)
    assert torch.allclose(one.scale, lazy.scale)


def test_dead_inputs_get_zero_weight() -> None:
    x = torch.randn(32, 4, generator=_gen(6))
    x[:, 2] = 0.0
    w = torch.randn(3, 4, generator=_gen(7))
    w_hat = dequantize(gptq_quantize(w, gptq_hessian(x), 8))
    assert torch.all(w_hat[:, 2] == 0)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"weight": torch.ones(4)}, ValueError, "weight must be 2-D"),
        ({"hessian": torch.eye(3)}, ValueError, "hessian must be"),
        ({"weight": torch.ones(2, 4, dtype=torch.int32)}, TypeError, "weight"),
        ({"bits": 3}, ValueError, "bits"),
        ({"scheme": "nf4"}, ValueError, "scheme"),
        ({"group_size": 3}, ValueError, "group_size"),
        ({"block_size": 0}, ValueError, "block_size"),
        ({"percdamp": -0.1}, ValueError, "percdamp"),
        ({"hessian": -torch.eye(4), "percdamp": 0.0}, ValueError, "positive definite"),
    ],
)
def test_bad_input_raises(kwargs: dict, error: type, match: str) -> None:
    args = {"weight": torch.ones(2, 4), "hessian": torch.eye(4)} | kwargs
    with pytest.raises(error, match=match):
        gptq_quantize(**args)


def test_hessian_rejects_integer_input() -> None:
    with pytest.raises(TypeError, match="x must be"):
        gptq_hessian(torch.ones(2, 2, dtype=torch.int64))
