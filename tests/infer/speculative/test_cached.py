"""Speculative decoding with KV caches: the target's greedy output and law, rollback."""

from __future__ import annotations

import pytest
import torch
from aiinfra import results
from aiinfra.infer.speculative.bench import (
    SpeculativeBenchConfig,
    mean_acceptance,
    sample_cached,
)
from aiinfra.infer.speculative.cached import rollback, speculative_generate_cached
from aiinfra.infer.speculative.decoding import speculative_generate
from aiinfra.infer.speculative.toys import noisy_copy, scaled_model
from aiinfra.models.transformer import Transformer, generate_greedy

CHI2_999_DF3 = 16.266  # chi-square quantile at 0.999, 3 degrees of freedom (tables)
SMALL = {"d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": 32}


def _model(seed: int, scale: float = 1.0, **shape: int) -> Transformer:
    """A small model from a fixed seed; ``scale`` multiplies every weight."""
    base = {"vocab_size": 32, "d_model": 32, "n_layers": 2, "max_seq_len": 64}
    return scaled_model(seed, scale, **(base | shape))


def test_greedy_equals_target_greedy_for_every_k() -> None:
    target = _model(0, scale=5.0, **SMALL)  # scaled: peaked laws, no early cycle
    draft = noisy_copy(target, 0.05)
    prompt = torch.tensor([[1, 5, 9, 3]])
    want = generate_greedy(target, prompt, 14)
    for k in (1, 4):
        got = speculative_generate_cached(target, draft, prompt, 14, k)
        assert torch.equal(got.tokens, want), k
        assert got.drafted == k * got.target_calls
        assert 0 < got.accepted < got.drafted  # some proposals kept, some rolled back
        # the uncached loop (no rollback to get wrong) makes the same decisions
        ref = speculative_generate(target, draft, prompt, 14, k)
        assert (got.target_calls, got.accepted) == (ref.target_calls, ref.accepted)
    # the target as its own draft: every proposal kept, ceil(14 / (k+1)) calls
    same = speculative_generate_cached(target, target, prompt, 14, 4)
    assert torch.equal(same.tokens, want) and same.target_calls == 3


def test_sampled_tokens_equal_the_uncached_loop_with_the_same_generator() -> None:
    """At T = 1 both loops draw in the same order: the same seed, the same tokens."""
    target = _model(0, scale=20.0, **SMALL)
    draft = _model(2, scale=20.0, **SMALL)  # an unrelated draft: many rejections
    prompt = torch.tensor([[3, 1]])
    g1, g2 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
    got = speculative_generate_cached(target, draft, prompt, 12, 2, 1.0, g1)
    ref = speculative_generate(target, draft, prompt, 12, 2, 1.0, g2)
    assert torch.equal(got.tokens, ref.tokens)
    assert got.accepted == ref.accepted < got.drafted


def _chi2(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    counts = torch.bincount(tokens, minlength=probs.numel()).double()
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_first_and_third_token_follow_the_target_law() -> None:
    """V = 4; the exact laws come from the target alone, by enumerating histories."""
    shape = {"vocab_size": 4, "d_model": 8, "n_layers": 1, "n_heads": 1, "d_ff": 8}
    target = _model(3, scale=20.0, **shape, max_seq_len=8)
    draft = _model(13, scale=20.0, **shape, max_seq_len=8)  # alpha about 0.46
    prompt, n, temp = torch.tensor([[1, 2]]), 120, 1.0
    g = torch.Generator().manual_seed(0)
    out = torch.cat(
        [
            speculative_generate_cached(target, draft, prompt, 3, 2, temp, g).tokens
            for _ in range(n)
        ]
    )  # (n, 5): 2 prompt tokens, 3 new
    with torch.no_grad():
        p1 = target(prompt)[0, -1].double().softmax(-1)  # (V,)
        hist = torch.cartesian_prod(torch.arange(4), torch.arange(4))  # (16, 2)
        seqs = torch.cat([prompt.expand(16, 2), hist], dim=1)  # (16, 4)
        law = target(seqs).double().softmax(-1)  # (16, 4, V)
    # P(x3) = sum over (x1, x2) of p(x1) p(x2 | x1) p(x3 | x1, x2)
    weight = p1[hist[:, 0]] * law[torch.arange(16), 2, hist[:, 1]]  # (16,)
    p3 = (weight[:, None] * law[:, 3]).sum(0)  # (V,)
    assert float(p1.min()) > 0.02 and float(p3.min()) > 0.02  # every cell populated
    assert _chi2(out[:, 2], p1) < CHI2_999_DF3
    assert _chi2(out[:, 4], p3) < CHI2_999_DF3
    # the test has power: the draft's own law at the first position is rejected
    with torch.no_grad():
        q1 = draft(prompt)[0, -1].double().softmax(-1)
    drafts = torch.multinomial(q1, n, replacement=True, generator=g)
    assert _chi2(drafts, p1) > 5 * CHI2_999_DF3


def test_rollback_then_decoding_equals_a_fresh_cache() -> None:
    model = _model(0, **SMALL)
    tokens = torch.tensor([[4, 8, 15, 16, 23, 31]])
    caches = model.new_caches(1, 16)
    with torch.no_grad():
        model(tokens, caches)
        rollback(caches, 3)  # forget 16, 23, 31
        got = model(torch.tensor([[7, 9]]), caches)  # (1, 2, V)
        want = model(torch.tensor([[4, 8, 15, 7, 9]]))[:, 3:]
    assert all(c.length == 5 for c in caches)
    torch.testing.assert_close(got, want)


def test_bad_input_is_named() -> None:
    target, draft = _model(0, **SMALL), _model(1, **SMALL)
    p = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match="prompt"):
        speculative_generate_cached(target, draft, torch.tensor([[1], [2]]), 4, 2)
    with pytest.raises(TypeError, match="prompt"):
        speculative_generate_cached(target, draft, torch.tensor([[1.0]]), 4, 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate_cached(target, draft, p, 0, 2)
    with pytest.raises(ValueError, match="k must"):
        speculative_generate_cached(target, draft, p, 4, 0)
    with pytest.raises(ValueError, match="temperature"):
        speculative_generate_cached(target, draft, p, 4, 2, -0.5)
    with pytest.raises(ValueError, match="max_seq_len"):
        speculative_generate_cached(target, draft, p, 60, 4)
    with pytest.raises(ValueError, match="vocabulary"):
        speculative_generate_cached(target, _model(1, vocab_size=16, **SMALL), p, 4, 2)
    with pytest.raises(TypeError, match="draft must be a Transformer"):
        speculative_generate_cached(target, torch.nn.Linear(2, 2), p, 4, 2)
    caches = target.new_caches(1, 8)
    with pytest.raises(ValueError, match=r"length must be in \[0, 0\]"):
        rollback(caches, 1)
    with pytest.raises(ValueError, match="length must"):
        rollback(caches, -1)


def test_bench_baseline_and_acceptance_by_independent_means() -> None:
    model = _model(0, scale=5.0, **SMALL)
    prompt = torch.tensor([[1, 5]])
    g = torch.Generator().manual_seed(0)
    # at temperature 0 the plain sampler is greedy decoding
    assert torch.equal(
        sample_cached(model, prompt, 6, 0.0, g), generate_greedy(model, prompt, 6)
    )
    # a draft identical to the target is always accepted: alpha = 1
    out = generate_greedy(model, prompt, 6)
    assert mean_acceptance(model, model, out, 2, 1.0) == pytest.approx(1.0)
    other = noisy_copy(model, 0.5)
    assert 0 < mean_acceptance(model, other, out, 2, 1.0) < 0.99


def test_bench_bad_input_is_named(tmp_path) -> None:
    with pytest.raises(ValueError, match="ks must"):
        SpeculativeBenchConfig(ks=(0, 2))
    with pytest.raises(ValueError, match="new_tokens must"):
        SpeculativeBenchConfig(new_tokens=0)
    with pytest.raises(ValueError, match="temperature must"):
        SpeculativeBenchConfig(temperature=0.0)
    with pytest.raises(FileNotFoundError, match="aiinfra bench speculative"):
        results.load("speculative", "cpu", tmp_path / "missing.json")
