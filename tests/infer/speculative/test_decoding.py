"""Speculative decoding keeps the target's law; its speed-up formula; its bad input."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from aiinfra.book.inference.speculative import spec_chi2_quantile
from aiinfra.infer.speculative.decoding import (
    acceptance_rate,
    expected_tokens_per_call,
    residual_distribution,
    speculative_generate,
    verify,
)
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer, generate_greedy

CHI2_999_DF4 = 18.467  # chi-square quantile at 0.999, 4 degrees of freedom (tables)

# toy target p and draft q over V = 5; by hand: sum min(p, q) = .1+.2+.1+.1+.1 = 0.6,
# and TV = (.3 + .1 + .2 + .1 + .1) / 2 = 0.4
P = torch.tensor([0.4, 0.3, 0.1, 0.1, 0.1], dtype=torch.float64)
Q = torch.tensor([0.1, 0.2, 0.3, 0.2, 0.2], dtype=torch.float64)


def _draw(q: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """Drafts ``(B, k)`` from ``q`` of shape ``(B, k, V)``."""
    B, k, V = q.shape
    return torch.multinomial(q.reshape(B * k, V), 1, generator=g).reshape(B, k)


def _chi2(tokens: torch.Tensor, probs: torch.Tensor) -> float:
    counts = torch.bincount(tokens, minlength=probs.numel()).double()
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_chi2_quantile_matches_the_tables_and_the_closed_form() -> None:
    assert spec_chi2_quantile() == pytest.approx(CHI2_999_DF4, abs=5e-4)  # the book's
    assert spec_chi2_quantile(0.999, 3) == pytest.approx(16.266, abs=5e-4)  # tables
    assert spec_chi2_quantile(0.95, 1) == pytest.approx(1.959964**2, rel=1e-6)  # z^2
    # two degrees of freedom: the CDF is 1 - exp(-x / 2), so x = -2 ln(1 - level)
    for level in (0.5, 0.9, 0.999):
        want = -2 * math.log(1 - level)
        assert spec_chi2_quantile(level, 2) == pytest.approx(want, rel=1e-10)


def test_acceptance_rate_is_one_minus_total_variation() -> None:
    assert float(acceptance_rate(P, Q)) == pytest.approx(0.6, abs=1e-12)
    g = torch.Generator().manual_seed(0)
    p = torch.rand(8, 7, generator=g, dtype=torch.float64)
    q = torch.rand(8, 7, generator=g, dtype=torch.float64)
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    tv = 0.5 * (p - q).abs().sum(-1)
    torch.testing.assert_close(acceptance_rate(p, q), 1 - tv)


def test_expected_tokens_per_call_by_hand() -> None:
    # alpha = 0.6, k = 3: 1 + 0.6 + 0.36 + 0.216 = 2.176 tokens per target call
    assert expected_tokens_per_call(0.6, 3) == pytest.approx(2.176, abs=1e-12)
    assert expected_tokens_per_call(0.5, 1) == pytest.approx(1.5)
    assert expected_tokens_per_call(0.0, 4) == 1.0
    assert expected_tokens_per_call(1.0, 4) == 5.0


def test_residual_by_hand() -> None:
    # max(0, p - q) = (.3, .1, 0, 0, 0), normalised by 0.4
    r = residual_distribution(P, Q)
    torch.testing.assert_close(
        r, torch.tensor([0.75, 0.25, 0, 0, 0], dtype=torch.float64)
    )
    torch.testing.assert_close(residual_distribution(P, P), P)


def test_first_emitted_token_follows_target() -> None:
    """20k rows at once; position 0 uses the toy p, q, later positions other laws."""
    n, k = 20_000, 3
    g = torch.Generator().manual_seed(0)
    p_rest = torch.tensor(
        [[0.2] * 5, [0.05, 0.05, 0.1, 0.3, 0.5], [0.5, 0.2, 0.1, 0.1, 0.1]]
    )
    q_rest = torch.tensor([[0.3, 0.3, 0.2, 0.1, 0.1], [0.2] * 5])
    p = torch.cat([P[None], p_rest.double()])[None].expand(n, k + 1, 5)
    q = torch.cat([Q[None], q_rest.double()])[None].expand(n, k, 5)
    draft = _draw(q, g)
    tokens, count = verify(p, q, draft, g)
    assert _chi2(tokens[:, 0], P) < CHI2_999_DF4
    # the bound has power: the drafts themselves follow q, which it rejects
    assert _chi2(draft[:, 0], P) > 100 * CHI2_999_DF4
    # emitted prefix is the drafts, then padding; counts in [1, k+1]
    assert int(count.min()) >= 1 and int(count.max()) == k + 1
    emitted = torch.arange(k + 1)[None] < count[:, None]
    assert bool((tokens >= 0).eq(emitted).all())
    accepted = torch.arange(k)[None] < (count[:, None] - 1)
    assert bool((tokens[:, :k] == draft).logical_or(~accepted).all())


def test_mean_tokens_per_call_matches_formula() -> None:
    n, k = 20_000, 3
    g = torch.Generator().manual_seed(1)
    p = P[None, None].expand(n, k + 1, 5)
    q = Q[None, None].expand(n, k, 5)
    _, count = verify(p, q, _draw(q, g), g)
    c = count.double()
    tolerance = 5 * float(c.std()) / math.sqrt(n)  # five standard errors
    assert abs(float(c.mean()) - 2.176) < tolerance  # alpha = 0.6 by hand, k = 3
    # the number of accepted drafts is 1 + min(k, Geometric): P(count = 1) = 1 - alpha
    assert abs(float((c == 1).double().mean()) - 0.4) < 5 * math.sqrt(0.24 / n)


def test_identical_draft_accepts_everything() -> None:
    g = torch.Generator().manual_seed(2)
    q = Q[None, None].expand(100, 4, 5)
    p = Q[None, None].expand(100, 5, 5)
    tokens, count = verify(p, q, _draw(q, g), g)
    assert bool((count == 5).all())


@pytest.mark.parametrize(
    ("p", "q", "draft", "error", "match"),
    [
        (
            P[None, None].expand(1, 3, 5) * 2,
            Q[None, None].expand(1, 2, 5),
            [[0, 1]],
            ValueError,
            "sum to 1",
        ),
        (
            P[None, None].expand(1, 3, 5),
            -Q[None, None].expand(1, 2, 5),
            [[0, 1]],
            ValueError,
            "non-negative",
        ),
        (
            P[None, None].expand(1, 2, 5),
            Q[None, None].expand(1, 2, 5),
            [[0, 1]],
            ValueError,
            "k\\+1",
        ),
        (
            P[None, None].expand(1, 1, 5),
            Q[None, None].expand(1, 0, 5),
            [[]],
            ValueError,
            "k >= 1",
        ),
        (
            P[None, None].expand(1, 3, 5),
            Q[None, None].expand(1, 2, 5),
            [[0]],
            ValueError,
            "draft must",
        ),
        (
            P[None, None].expand(1, 3, 5),
            Q[None, None].expand(1, 2, 5),
            [[0, 5]],
            ValueError,
            "in \\[0, 5\\)",
        ),
        (
            P[None, None].expand(1, 3, 5),
            torch.eye(5, dtype=torch.float64)[None, :2],
            [[0, 0]],
            ValueError,
            "positive",
        ),
        (
            P[None, None].expand(1, 3, 5),
            Q[None, None].expand(1, 2, 5),
            [[0.0, 1.0]],
            TypeError,
            "draft",
        ),
    ],
)
def test_verify_bad_input_is_named(p, q, draft, error, match) -> None:
    d = torch.tensor(draft) if draft != [[]] else torch.zeros(1, 0, dtype=torch.long)
    with pytest.raises(error, match=match):
        verify(p, q, d)


def test_formula_and_rate_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_call(1.2, 3)
    with pytest.raises(ValueError, match="k must"):
        expected_tokens_per_call(0.5, 0)
    with pytest.raises(ValueError, match="same shape"):
        acceptance_rate(P, Q[:4] / Q[:4].sum())


def _models() -> tuple[Transformer, Transformer]:
    """A tiny target, and as draft a copy with slightly perturbed weights."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        target = Transformer(
            TransformerConfig(vocab_size=32, d_model=32, n_layers=2, max_seq_len=64)
        )
        draft = copy.deepcopy(target)
        with torch.no_grad():
            for w in draft.parameters():
                w.add_(0.005 * torch.randn_like(w))
    return target.eval(), draft.eval()


def test_greedy_speculative_equals_target_greedy() -> None:
    target, draft = _models()
    prompt = torch.tensor([[1, 5, 9, 3]])
    want = generate_greedy(target, prompt, 12)
    for k in (1, 3):
        got = speculative_generate(target, draft, prompt, 12, k, temperature=0.0)
        assert torch.equal(got.tokens, want)
        assert got.drafted == k * got.target_calls
        assert 0 < got.accepted < got.drafted  # the draft agrees sometimes, not always
        assert got.target_calls + got.accepted >= 12  # each call adds 1 + its accepted
    # the target as its own draft: all k kept each call, so ceil(12 / (k+1)) calls
    same = speculative_generate(target, target, prompt, 12, 3)
    assert torch.equal(same.tokens, want)
    assert same.target_calls == 3 and same.accepted == same.drafted == 9


def test_sampled_speculative_keeps_prefix_and_length() -> None:
    target, draft = _models()
    prompt = torch.tensor([[2, 4]])
    out = speculative_generate(
        target, draft, prompt, 9, 2, 1.0, torch.Generator().manual_seed(0)
    )
    assert out.tokens.shape == (1, 11) and torch.equal(out.tokens[:, :2], prompt)
    assert 0 <= out.accepted <= out.drafted
    again = speculative_generate(
        target, draft, prompt, 9, 2, 1.0, torch.Generator().manual_seed(0)
    )
    assert torch.equal(out.tokens, again.tokens)


def test_loop_bad_input_is_named() -> None:
    target, draft = _models()
    with pytest.raises(ValueError, match="prompt"):
        speculative_generate(target, draft, torch.tensor([[1], [2]]), 4, 2)
    with pytest.raises(ValueError, match="max_new_tokens"):
        speculative_generate(target, draft, torch.tensor([[1]]), 0, 2)
    with pytest.raises(ValueError, match="k must"):
        speculative_generate(target, draft, torch.tensor([[1]]), 4, 0)
    with pytest.raises(ValueError, match="temperature"):
        speculative_generate(target, draft, torch.tensor([[1]]), 4, 2, -1.0)
    with pytest.raises(ValueError, match="max_seq_len"):
        speculative_generate(target, draft, torch.tensor([[1]]), 62, 4)


def test_verification_stays_memory_bound_at_long_context_on_the_book_roofline():
    # MagicDec (Sadhukhan et al. 2025): the KV reads grow with batch x context and
    # keep the step memory-bound. By hand for batch 1 and 8192 cached tokens: the
    # 15.0 GB of bf16 weights and 1.07 GB of cache dwarf 5 x 15 GFLOP at 989
    # TFLOP/s (76 us against 4.8 ms): verifying 5 tokens costs one step.
    from aiinfra.book.inference import speculative as page

    assert page.spec_verify_ratio(1, 8192) == pytest.approx(1.0, abs=1e-3)
    for context in (2048, 8192):  # every batch that fits one H100
        assert page.spec_verify_ratio_at_fit(context) == pytest.approx(1.0, abs=0.01)
    # short context, large batch: the matmuls become compute-bound
    assert page.spec_verify_ratio(256, 256) > 2
