"""Activation checkpointing: equal gradients, fewer saved bytes, Chen's sqrt(n) rule."""

import pytest
import torch
import torch.utils.checkpoint as tc
from aiinfra.memory.checkpoint import checkpoint, checkpoint_sequential
from aiinfra.memory.experiments import gelu_chain, measure_layers, measure_segments
from aiinfra.memory.measure import SavedTensorLog
from aiinfra.memory.segments import (
    checkpointed_peak_bytes,
    optimal_segments,
    segment_sizes,
    sqrt_rule,
)
from aiinfra.memory.tiny_gpt import TinyGPT, dropout, tiny_gpt_config


def _grads(recompute, torch_checkpoint=False):
    torch.manual_seed(0)
    config = tiny_gpt_config(n_layers=2)
    model = TinyGPT(config, recompute=recompute).train()
    T = config.max_seq_len
    idx = torch.randint(config.vocab_size, (2, T))
    torch.manual_seed(1)  # the same dropout masks in every run
    if torch_checkpoint:
        x = model.wte(idx) + model.wpe(torch.arange(T))
        x = dropout(x, model.p, True)  # as TinyGPT.forward
        for block in model.blocks:
            x = tc.checkpoint(block, x, use_reentrant=False, preserve_rng_state=True)
        loss = model.lm_head(model.ln_f(x)).logsumexp(-1).mean()
    else:
        loss = model(idx).logsumexp(-1).mean()
    loss.backward()
    return [p.grad for p in model.parameters()]


@pytest.mark.parametrize(
    "recompute, torch_checkpoint",
    [("full", False), ("selective", False), ("none", True)],
)
def test_checkpointed_gradients_equal_plain_backward(recompute, torch_checkpoint):
    # Dropout masks are replayed, so recomputation gives the very same numbers.
    expected = _grads("none")
    got = _grads(recompute, torch_checkpoint)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-7)


def test_full_recompute_keeps_only_layer_inputs_as_torch_checkpoint_does():
    s, b, h, n_layers = 16, 2, 32, 3
    config = tiny_gpt_config(seq_len=s, d_model=h, n_layers=n_layers)
    mine = measure_layers(config, b, torch.bfloat16, recompute="full")
    assert mine.forward_bytes == n_layers * 2 * s * b * h  # Korthikanti: 2sbh
    # torch.utils.checkpoint (non-reentrant) saves the same inputs.
    torch.manual_seed(0)
    model = TinyGPT(config).bfloat16()
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    with SavedTensorLog([*model.parameters(), *model.buffers()]) as log:
        for block in model.blocks:
            x = tc.checkpoint(block, x, use_reentrant=False)
    assert log.live_bytes == mine.forward_bytes


def test_measured_peak_follows_the_segment_model_for_every_k():
    n, width, b = 16, 16, 4
    layers = gelu_chain(n, width)
    c = 4 * b * width  # one fp32 layer input; Linear + GELU saves two: a = 2c
    peaks = {}
    for k in range(1, n + 1):
        m = measure_segments(layers, k, b)
        assert m.forward_bytes == k * c  # forward keeps only the k checkpoints
        assert m.peak_bytes == checkpointed_peak_bytes(n, k, 2 * c, c)
        peaks[k] = m.peak_bytes
    best = min(peaks, key=peaks.get)
    assert best == optimal_segments(n, 2 * c, c) == 6
    assert abs(best - sqrt_rule(n, 2 * c, c)) < 1  # sqrt(32) = 5.66
    assert peaks[best] < peaks[1] / 3  # 9c instead of 32c


def test_sqrt_n_rule_for_equal_layer_and_checkpoint_sizes():
    # Chen et al. 2016, Sec. 4: with a = c, k = sqrt(n) segments reach the least
    # peak, about 2 sqrt(n) layers' worth (the minimum is flat: neighbours tie).
    for n in (16, 64, 100):
        best = checkpointed_peak_bytes(n, optimal_segments(n, 1.0, 1.0), 1.0, 1.0)
        assert checkpointed_peak_bytes(n, round(n**0.5), 1.0, 1.0) == best
        assert best == 2 * n**0.5 - 1


def test_segment_sizes_match_checkpoint_sequential():
    assert segment_sizes(10, 4) == [3, 3, 2, 2]
    layers = gelu_chain(5, 4)
    x = torch.randn(2, 4, requires_grad=True)
    out = checkpoint_sequential(layers, 2, x)
    ref = x
    for layer in layers:
        ref = layer(ref)
    torch.testing.assert_close(out, ref)


def test_bad_checkpoint_input_is_rejected():
    x = torch.randn(3)
    with pytest.raises(ValueError, match="require grad"):
        checkpoint(torch.sin, x)
    with pytest.raises(TypeError, match="tensor"):
        checkpoint(torch.sin, 3.0)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential(gelu_chain(2, 4), 3, x.requires_grad_())
    with pytest.raises(ValueError, match="segments"):
        segment_sizes(4, 0)
    with pytest.raises(ValueError, match="input_bytes"):
        sqrt_rule(4, 1.0, 0.0)
