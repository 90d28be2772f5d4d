"""SmoothQuant and AWQ: hand scales, exact smoothing, less error with outliers."""

from __future__ import annotations

import pytest
import torch
from aiinfra.infer.quant.awq import awq_objective, awq_search, awq_weight
from aiinfra.infer.quant.rtn import dequantize, quantize
from aiinfra.infer.quant.smoothquant import (
    W8A8Linear,
    fold_into_norm,
    quantize_activation,
    smooth,
    smoothing_scales,
)
from aiinfra.models.layers import RMSNorm
from torch import nn


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _assert_close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-5) -> None:
    """``|a - b| <= tol (1 + |b|)``; torch.testing's first call imports for ~10 s."""
    assert a.shape == b.shape
    assert torch.all((a - b).abs() <= tol * (1 + b.abs())), (a - b).abs().max()


def _outlier_activations(n: int = 64, d_in: int = 32, seed: int = 0) -> torch.Tensor:
    """Activations ``(n, d_in)`` with channels 3 and 17 about 50x the others."""
    x = torch.randn(n, d_in, generator=_gen(seed))
    x[:, 3] *= 50.0
    x[:, 17] *= 40.0
    return x


def test_smoothing_scales_match_the_formula_by_hand() -> None:
    # FACTS.md: s_j = max|X_j|^alpha / max|W_j|^(1 - alpha), alpha = 0.5.
    # Column maxima of the two weights together: 2, 1, 0.25.
    act = torch.tensor([16.0, 4.0, 1.0])
    wq = torch.tensor([[2.0, -0.5, 0.25], [1.0, 1.0, 0.0]])
    wk = torch.tensor([[-1.0, 0.5, -0.25]])
    s = smoothing_scales(act, [wq, wk], alpha=0.5)
    assert s.tolist() == pytest.approx([8**0.5, 2.0, 2.0])  # sqrt(16/2), 4/2, 1/.5
    s1 = smoothing_scales(act, wq, alpha=1.0)
    assert s1.tolist() == [16.0, 4.0, 1.0]  # all the difficulty to the weights


def test_smoothed_product_equals_the_original_exactly() -> None:
    # Powers of two make diag(s)^-1 and diag(s) exact in floating point.
    x = torch.randn(5, 4, generator=_gen(1))
    w = torch.randn(3, 4, generator=_gen(2))
    s = torch.tensor([8.0, 0.5, 1.0, 32.0])
    x_s, w_s = smooth(x, w, s)
    assert torch.equal(x_s @ w_s.T, x @ w.T)
    s_any = smoothing_scales(x.abs().amax(0), w).double()
    x_d, w_d = smooth(x.double(), w.double(), s_any)
    want = x.double() @ w.double().T
    _assert_close(x_d @ w_d.T, want, 1e-14)


def test_smoothing_equalises_the_channel_maxima() -> None:
    x, w = _outlier_activations(), torch.randn(16, 32, generator=_gen(3))
    s = smoothing_scales(x.abs().amax(0), w)
    x_s, w_s = smooth(x, w, s)
    # At alpha = 0.5 both maxima become sqrt(max|X_j| max|W_j|) in every channel.
    _assert_close(x_s.abs().amax(0), w_s.abs().amax(0))
    ratio = x.abs().amax(0).max() / x.abs().amax(0).median()
    ratio_s = x_s.abs().amax(0).max() / x_s.abs().amax(0).median()
    assert ratio > 40 and ratio_s < 0.25 * ratio


def test_folding_into_the_norm_keeps_the_function() -> None:
    norm = RMSNorm(8)
    lin = nn.Linear(8, 4, bias=False)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(8, generator=_gen(4)) + 0.5)
        lin.weight.copy_(torch.randn(4, 8, generator=_gen(5)))
    x = torch.randn(6, 8, generator=_gen(6))
    before = lin(norm(x))
    s = smoothing_scales(norm(x).abs().amax(0).detach(), lin.weight)
    fold_into_norm(norm.weight, [lin], s)
    _assert_close(lin(norm(x)), before)
    # The norm's output now has the smoothed channel maxima.
    _assert_close(norm(x).abs().amax(0), lin.weight.abs().amax(0))


def test_smoothquant_reduces_w8a8_error_with_outlier_channels() -> None:
    x = _outlier_activations(seed=7)
    lin = nn.Linear(32, 16, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(16, 32, generator=_gen(8)))
    y = lin(x)
    plain = W8A8Linear(lin, act_granularity="tensor")(x)
    s = smoothing_scales(x.abs().amax(0), lin.weight.detach())
    smoothed = W8A8Linear(lin, s, act_granularity="tensor")(x)
    err_plain, err_smooth = (plain - y).norm(), (smoothed - y).norm()
    assert err_smooth < 0.5 * err_plain  # measured about 3x lower
    # Independent reference for plain W8A8: quantize both operands by hand.
    w_hat = dequantize(quantize(lin.weight.detach(), 8, "absmax", "channel"))
    x_hat = dequantize(quantize(x, 8, "absmax", "tensor"))
    _assert_close(plain, x_hat @ w_hat.T)


def test_per_token_activation_quantization_rounds_each_row() -> None:
    x = torch.tensor([[1.0, -127.0], [12.7, 2.0]])
    # Row maxima 127 and 12.7: steps 1 and 0.1, on which both rows lie.
    _assert_close(quantize_activation(x, "token"), x)
    # One step of 1 for the tensor: 12.7 -> 13.
    assert quantize_activation(x, "tensor")[1].tolist() == [13.0, 2.0]


def test_awq_alpha_zero_is_round_to_nearest() -> None:
    w = torch.randn(8, 16, generator=_gen(9))
    rtn = dequantize(quantize(w, 4, "zeropoint", "group", 8))
    assert torch.equal(awq_weight(w, torch.ones(16), 4, "zeropoint", 8), rtn)


def test_awq_not_worse_than_rtn_on_its_objective_and_better_with_salient_inputs() -> (
    None
):
    x = torch.randn(128, 32, generator=_gen(10))
    x[:, :4] *= 20.0  # salient input channels
    w = torch.randn(16, 32, generator=_gen(11))
    result = awq_search(x, w, 4, "zeropoint", 16)
    rtn = dequantize(quantize(w, 4, "zeropoint", "group", 16))
    rtn_err = float(((x @ (w - rtn).T) ** 2).mean())  # computed without awq.py
    awq_err = awq_objective(x, w, result.s, 4, "zeropoint", 16)
    assert result.losses[0] == pytest.approx(rtn_err)
    assert awq_err == min(result.losses) and result.alpha > 0
    assert awq_err < 0.8 * rtn_err


def test_awq_shared_scales_cover_every_weight() -> None:
    x = torch.randn(32, 8, generator=_gen(12))
    ws = [torch.randn(4, 8, generator=_gen(13)), torch.randn(6, 8, generator=_gen(14))]
    s = torch.rand(8, generator=_gen(15)) + 0.5
    together = awq_objective(x, ws, s, 4, "absmax", None)
    apart = [awq_objective(x, w, s, 4, "absmax", None) for w in ws]
    assert together == pytest.approx((4 * apart[0] + 6 * apart[1]) / 10)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: smoothing_scales(torch.ones(3), torch.ones(2, 4)),
            ValueError,
            "in = 3, the last dimension of act_absmax",
        ),
        (lambda: smoothing_scales(torch.ones(3), [], 0.5), ValueError, "at least one"),
        (
            lambda: smoothing_scales(-torch.ones(3), torch.ones(2, 3)),
            ValueError,
            ">= 0",
        ),
        (
            lambda: smoothing_scales(torch.ones(3), torch.ones(2, 3), 1.5),
            ValueError,
            "alpha",
        ),
        (
            lambda: smooth(torch.ones(2, 3), torch.ones(2, 3), torch.zeros(3)),
            ValueError,
            "> 0",
        ),
        (
            lambda: smooth(torch.ones(2, 4), torch.ones(2, 3), torch.ones(3)),
            ValueError,
            "x must",
        ),
        (
            lambda: smooth(torch.ones(2, 3), torch.ones(2, 3), torch.ones(2)),
            ValueError,
            "s must",
        ),
        (
            lambda: smooth(torch.ones(2, 3), torch.ones(2, 3), [1.0] * 3),
            TypeError,
            "s must",
        ),
        (
            lambda: quantize_activation(torch.ones(2, 3), "channel"),
            ValueError,
            "granularity",
        ),
        (
            lambda: W8A8Linear(nn.Linear(3, 2), act_granularity="row"),
            ValueError,
            "act_gran",
        ),
        (lambda: W8A8Linear(nn.Linear(3, 2), torch.ones(2)), ValueError, "s must"),
        (
            lambda: fold_into_norm(torch.ones(3), [nn.Linear(4, 2)], torch.ones(3)),
            ValueError,
            "s must",
        ),
        (lambda: awq_weight(torch.ones(2, 4), torch.ones(3)), ValueError, "s must"),
        (lambda: awq_weight(torch.ones(2, 4), -torch.ones(4)), ValueError, "s must"),
        (
            lambda: awq_search(torch.ones(4, 3), torch.ones(2, 4)),
            ValueError,
            "in = 3, the last dimension of x",
        ),
        (
            lambda: awq_search(torch.ones(4, 4), torch.ones(2, 4), n_grid=0),
            ValueError,
            "n_grid",
        ),
        (lambda: awq_search(torch.ones(4, 4), []), ValueError, "at least one"),
        (
            lambda: awq_objective(
                torch.ones(4, 4, dtype=torch.int64), torch.ones(2, 4), torch.ones(4)
            ),
            TypeError,
            "x must",
        ),
    ],
)
def test_bad_input_raises(call: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        call()
