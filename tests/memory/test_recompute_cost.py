"""The FLOPs recomputation adds: the papers' formulas, and torch's FLOP counter.

Ground truths: Narayanan et al. 2021 (Sec. 5.1): a GPT step with full
recomputation costs 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) FLOPs against the
model's 72 B s l h^2 (1 + s/(6h) + V/(12 l h)); Korthikanti et al. 2022 (Sec. 5):
selective recomputation runs QK^T and the attention over V again, 4 B s^2 h per
layer; and ``torch.utils.flop_counter.FlopCounterMode`` counting a step of the
package's own Transformer with ``torch.utils.checkpoint`` around each block (full)
or around the attention core (selective), against the same step without.
"""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.memory.recompute_cost import recompute_flops_per_token, recompute_overhead
from aiinfra.models.attention import gqa
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torch.utils.flop_counter import FlopCounterMode


def test_full_recompute_is_narayanans_96_against_72():
    c, B, s = preset("gpt3-175b"), 1536, 2048
    h, n, V = c.d_model, c.n_layers, c.vocab_size  # the paper's l is n here
    with_recompute = 96 * B * s * n * h**2 * (1 + s / (6 * h) + V / (16 * n * h))
    model = 72 * B * s * n * h**2 * (1 + s / (6 * h) + V / (12 * n * h))
    extra = recompute_flops_per_token(c, s, "full") * B * s
    assert extra == pytest.approx(with_recompute - model, rel=1e-12)


def test_selective_recompute_is_the_attention_core_4bs2h_per_layer():
    c, s = preset("gpt3-175b"), 2048
    extra = recompute_flops_per_token(c, s, "selective")
    assert extra * s == 4 * s * s * c.d_model * c.n_layers
    # T / (18 h) of a layer's training FLOPs: under 1 % for GPT-3 at 2048 tokens
    assert recompute_overhead(c, s, "selective") < 0.01 < s / (18 * c.d_model) + 1e-3
    assert recompute_overhead(c, s, "none") == 0.0


def _step_flops(model, tokens, full: bool) -> int:
    # Without early stop, backward reruns the whole checkpointed forward, as
    # Megatron's recomputation does (torch's default stops once it has what
    # backward needs, which here skips the attention over V).
    with FlopCounterMode(display=False) as counter, set_checkpoint_early_stop(False):
        x = model.embed(tokens)  # (B, T, h)
        for block in model.blocks:
            x = checkpoint(block, x, use_reentrant=False) if full else block(x)
        logits = model.head(model.norm(x))  # (B, T, V)
        F.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("recompute", ["full", "selective"])
def test_torch_counts_the_same_extra_flops(recompute, monkeypatch):
    cfg = TransformerConfig(
        d_model=32, n_heads=4, n_kv_heads=2, d_ff=88, n_layers=2, max_seq_len=16
    )
    B, T = 2, 16
    torch.manual_seed(0)
    model = Transformer(cfg)
    tokens = torch.randint(cfg.vocab_size, (B, T))  # (B, T)
    plain = _step_flops(model, tokens, full=False)
    if recompute == "selective":  # checkpoint softmax(QK^T) V only
        core = gqa.grouped_attention
        monkeypatch.setattr(
            gqa,
            "grouped_attention",
            lambda *a, **k: checkpoint(core, *a, use_reentrant=False, **k),
        )
    again = _step_flops(model, tokens, full=recompute == "full")
    assert again - plain == recompute_flops_per_token(cfg, T, recompute) * B * T


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="recompute must be one of"):
        recompute_flops_per_token(preset("llama-3-8b"), 8192, "some")
    with pytest.raises(ValueError, match="seq must be a positive integer"):
        recompute_overhead(preset("llama-3-8b"), 0, "full")


def test_the_calculator_reports_the_extra_flops():
    from aiinfra.memory.calculator import estimate_memory, memory_report

    c = preset("gpt3-175b")  # full recomputation: Narayanan's 96 against 72
    est = estimate_memory(c, seq=2048, recompute="full")
    h, n, V, s = c.d_model, c.n_layers, c.vocab_size, 2048
    model = 72 * (1 + s / (6 * h) + V / (12 * n * h))
    assert est.recompute_flops == pytest.approx(
        96 * (1 + s / (6 * h) + V / (16 * n * h)) / model - 1, rel=1e-9
    )
    table = memory_report(c, "gpt3", seq=2048, recompute="full")
    assert table.stamp.endswith("recomputation adds {extra} to the step's FLOPs")
    assert table.fields["extra"] == f"{est.recompute_flops:.1%}"
    assert estimate_memory(c, seq=2048).recompute_flops == 0.0
