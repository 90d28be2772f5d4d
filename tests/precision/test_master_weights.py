"""FP32 master weights: small updates survive; with a loss scaler, fp16 trains."""

import pytest
import torch
from aiinfra.precision.loss_scaler import DynamicLossScaler
from aiinfra.precision.master_weights import MasterWeights


def _train(dtype, master, steps=100, update=1e-3):
    w = torch.nn.Parameter(torch.ones(4, dtype=dtype))
    make = lambda ps: torch.optim.SGD(ps, lr=update)  # noqa: E731
    opt = MasterWeights([w], make) if master else make([w])
    for _ in range(steps):
        w.grad = torch.ones_like(w)  # each step subtracts lr * 1 = 1e-3
        opt.step()
    return w


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_updates_below_half_eps_are_lost_without_master_weights(dtype):
    eps = torch.finfo(dtype).eps
    assert 1e-3 < eps / 2 or dtype == torch.float16
    w = _train(dtype, master=False, update=eps / 4)
    assert torch.all(w == 1.0)  # 1 - eps/4 rounds back to 1, every step


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_master_weights_keep_the_small_updates(dtype):
    eps = torch.finfo(dtype).eps
    w = _train(dtype, master=True, update=eps / 4)
    expected = torch.tensor(1 - 100 * eps / 4).to(dtype)  # the fp32 sum, rounded once
    assert torch.all(w == expected) and expected < 1


def test_fp16_gradients_that_underflow_are_kept_by_loss_scaling():
    # The loss is computed in fp32 from the fp16 weights (as under autocast), so the
    # gradient becomes fp16 where it reaches w: 1e-8 there is below fp16's 6e-8.
    x = torch.full((8,), 1e-8)
    for scale, survives in ((1.0, False), (2.0**16, True)):
        w = torch.nn.Parameter(torch.ones(8, dtype=torch.float16))
        master = MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=1e6))
        scaler = DynamicLossScaler(init_scale=scale)
        loss = (w.float() * x).sum()  # d loss / d w = 1e-8
        scaler.scale(loss).backward()
        assert bool(torch.all(w.grad > 0)) == survives
        assert master.step(scaler) is True
        scaler.update()
        assert bool(torch.all(w < 1)) == survives  # 1 - 1e6 * 1e-8 = 0.99


def test_overflow_skips_the_master_step():
    w = torch.nn.Parameter(torch.ones(2, dtype=torch.float16))
    master = MasterWeights([w], lambda ps: torch.optim.SGD(ps, lr=1.0))
    w.grad = torch.tensor([float("inf"), 1.0], dtype=torch.float16)
    assert master.step(DynamicLossScaler()) is False
    assert torch.all(w == 1) and torch.all(master.master[0] == 1)
    assert master.master[0].grad is None


def test_integer_parameters_are_rejected():
    with pytest.raises(TypeError, match="floating point"):
        MasterWeights([torch.zeros(2, dtype=torch.int64)], torch.optim.SGD)
