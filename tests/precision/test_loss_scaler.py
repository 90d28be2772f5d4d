"""DynamicLossScaler against torch.amp.GradScaler("cpu"), step by step."""

import pytest
import torch
from aiinfra.precision.loss_scaler import DynamicLossScaler


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
    )


def test_matches_gradscaler_with_injected_overflows():
    # GradScaler runs on CPU since torch 2.3 (torch.amp.GradScaler("cpu")).
    kwargs = dict(init_scale=2.0**10, growth_factor=2.0, backoff_factor=0.5)
    ours, theirs = _model(), _model()
    scaler = DynamicLossScaler(**kwargs, growth_interval=3)
    reference = torch.amp.GradScaler("cpu", **kwargs, growth_interval=3)
    opt_a = torch.optim.SGD(ours.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(theirs.parameters(), lr=0.1)
    torch.manual_seed(1)
    batches = [torch.randn(5, 4) for _ in range(12)]
    overflow_at = {2, 3, 9}  # two in a row, then one after a clean run
    for step, x in enumerate(batches):
        for model, opt, s in ((ours, opt_a, scaler), (theirs, opt_b, reference)):
            opt.zero_grad()
            s.scale(model(x).pow(2).mean()).backward()
            if step in overflow_at:
                model[0].weight.grad[0, 0] = float("inf")
            before = [p.detach().clone() for p in model.parameters()]
            s.step(opt)
            s.update()
            moved = any(
                not torch.equal(p, b)
                for p, b in zip(model.parameters(), before, strict=True)
            )
            assert moved == (step not in overflow_at)  # skipped exactly on overflow
        assert scaler.get_scale() == reference.get_scale()
        for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_backoff_and_growth_rule():
    s = DynamicLossScaler(init_scale=8.0, growth_interval=2)
    p = torch.nn.Parameter(torch.ones(1))
    scales = []
    for grad in [1.0, float("nan"), 1.0, 1.0, 1.0, float("inf")]:
        p.grad = torch.tensor([grad])
        s.unscale_([p])
        s.update()
        scales.append(s.get_scale())
    assert scales == [8.0, 4.0, 4.0, 8.0, 8.0, 4.0]


def test_bad_scaler_input_is_rejected():
    with pytest.raises(ValueError, match="backoff_factor"):
        DynamicLossScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        DynamicLossScaler(growth_interval=0)
    with pytest.raises(RuntimeError, match="step"):
        DynamicLossScaler().update()
