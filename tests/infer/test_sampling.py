"""Sampling processors against transformers' own, and draws against a known law."""

from __future__ import annotations

import pytest
import torch
from aiinfra.infer.sampling import (
    apply_temperature,
    greedy,
    min_p_filter,
    next_token,
    repetition_penalty,
    sample,
    top_k_filter,
    top_p_filter,
)
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

# chi-square quantiles at 0.999 (tables): a correct sampler fails 1 run in 1000,
# and the generator is fixed, so the test is deterministic.
CHI2_999 = {3: 16.266, 4: 18.467}


def _logits() -> torch.Tensor:
    """Random (6, 12) logits with ties and -inf entries, from a fixed generator."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 12, generator=g) * 2
    x[0, 3] = x[0, 7] = x[0, 9]  # a three-way tie
    x[1] = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0])
    x[2, :4] = float("-inf")
    x[3, 5] = x[3].max()  # tie at the top
    x[4, 1] = x[4, 2] = float("-inf")
    return x


def _seen() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 12, (6, 5), generator=g)


@pytest.mark.parametrize("t", [0.3, 1.0, 1.7])
def test_temperature_matches_transformers(t: float) -> None:
    x = _logits()
    assert torch.equal(
        apply_temperature(x, t), TemperatureLogitsWarper(t)(None, x.clone())
    )


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 12, 20])
def test_top_k_matches_transformers(k: int) -> None:
    x = _logits()
    assert torch.equal(top_k_filter(x, k), TopKLogitsWarper(k)(None, x.clone()))


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.6, 0.9, 0.99, 1.0])
def test_top_p_matches_transformers(p: float) -> None:
    x = _logits()
    assert torch.equal(top_p_filter(x, p), TopPLogitsWarper(p)(None, x.clone()))


@pytest.mark.parametrize("m", [0.0, 0.05, 0.2, 0.5, 1.0])
def test_min_p_matches_transformers(m: float) -> None:
    x = _logits()
    assert torch.equal(min_p_filter(x, m), MinPLogitsWarper(m)(None, x.clone()))


@pytest.mark.parametrize("penalty", [0.5, 1.0, 1.3, 2.0])
def test_repetition_penalty_matches_transformers(penalty: float) -> None:
    x, seen = _logits(), _seen()
    theirs = RepetitionPenaltyLogitsProcessor(penalty)(seen, x.clone())
    assert torch.equal(repetition_penalty(x, seen, penalty), theirs)


def test_filters_by_hand() -> None:
    """Probabilities 1/2, 1/4, 1/8, 1/8: exact in binary, so the cut-offs are exact."""
    x = torch.tensor([[0.5, 0.25, 0.125, 0.125]]).log()
    inf = float("-inf")
    # top-p 0.6: drop the two 1/8 (tail mass 1/4 <= 0.4), keep 1/2 and 1/4
    assert torch.isinf(top_p_filter(x, 0.6)).tolist() == [[False, False, True, True]]
    # top-p 0.8: the tail mass 1/8 <= 0.2 drops one 1/8, the lower index (stable sort)
    assert torch.isinf(top_p_filter(x, 0.8)).tolist() == [[False, False, True, False]]
    # top-k 3: the 3rd largest is tied with the 4th, so both stay
    assert not torch.isinf(top_k_filter(x, 3)).any()
    assert torch.isinf(top_k_filter(x, 2)).tolist() == [[False, False, True, True]]
    # min-p 0.5: threshold 1/4 keeps 1/2 and 1/4
    assert torch.isinf(min_p_filter(x, 0.5)).tolist() == [[False, False, True, True]]
    # penalty 2 on tokens 0 and 2: log(1/2) -> 2 log(1/2), log(1/8) -> 2 log(1/8)
    y = repetition_penalty(
        torch.tensor([[3.0, -1.0, -2.0, inf]]), torch.tensor([[0, 2, 3]]), 2.0
    )
    assert y.tolist() == [[1.5, -1.0, -4.0, inf]]


def _chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_sample_frequencies_match_distribution() -> None:
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    n = 40_000
    logits = probs.log().expand(n, 4).contiguous()
    draws = sample(logits, torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=4).double()
    assert _chi2(counts, probs.double()) < CHI2_999[3]
    # the bound has power: the same counts are far from a nearby wrong law
    wrong = torch.tensor([0.12, 0.2, 0.3, 0.38], dtype=torch.float64)
    assert _chi2(counts, wrong) > 10 * CHI2_999[3]


def test_sample_never_draws_filtered_tokens_and_follows_renormalised_law() -> None:
    probs = torch.tensor([0.05, 0.15, 0.3, 0.5])
    n = 40_000
    logits = top_k_filter(probs.log().expand(n, 4).contiguous(), 2)
    draws = sample(logits, torch.Generator().manual_seed(1))
    counts = torch.bincount(draws, minlength=4).double()
    assert counts[:2].sum() == 0
    assert (
        _chi2(counts[2:], torch.tensor([0.375, 0.625], dtype=torch.float64)) < 10.83
    )  # df 1


def test_same_generator_same_draws_and_greedy() -> None:
    x = _logits()
    a = sample(x, torch.Generator().manual_seed(5))
    b = sample(x, torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert greedy(torch.tensor([[0.0, 2.0, 2.0, 1.0]])).tolist() == [1]
    assert torch.equal(next_token(x, temperature=0.0), x.argmax(-1))


def test_next_token_applies_penalty_before_greedy() -> None:
    x = torch.tensor([[2.0, 1.5, 0.0]])
    assert next_token(x, temperature=0.0).tolist() == [0]
    got = next_token(x, temperature=0.0, penalty=2.0, seen=torch.tensor([[0]]))
    assert got.tolist() == [1]  # 2 / 2 = 1 < 1.5


def test_next_token_top_k_1_is_greedy() -> None:
    x = _logits()
    got = next_token(x, torch.Generator().manual_seed(0), temperature=0.7, top_k=1)
    assert torch.equal(got, top_k_filter(x, 1).argmax(-1))
    assert torch.isfinite(x.gather(1, got[:, None])).all()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda x: apply_temperature(x, 0.0), "temperature"),
        (lambda x: apply_temperature(x, -1.0), "temperature"),
        (lambda x: top_k_filter(x, 0), "k must"),
        (lambda x: top_k_filter(x, 2.5), "k must"),
        (lambda x: top_p_filter(x, 0.0), "top_p"),
        (lambda x: top_p_filter(x, 1.5), "top_p"),
        (lambda x: min_p_filter(x, -0.1), "min_p"),
        (
            lambda x: repetition_penalty(x, torch.zeros(6, 2, dtype=torch.long), 0.0),
            "penalty",
        ),
        (
            lambda x: repetition_penalty(x, torch.zeros(5, 2, dtype=torch.long), 1.2),
            "seen",
        ),
        (lambda x: repetition_penalty(x, torch.full((6, 2), 12), 1.2), "seen ids"),
        (lambda x: apply_temperature(x[0], 1.0), r"\(B, V\)"),
        (lambda x: sample(x[None], None), r"\(B, V\)"),
        (lambda x: sample(torch.full((1, 3), float("-inf"))), "finite"),
        (lambda x: next_token(x, temperature=-0.5), "temperature"),
        (lambda x: next_token(x, penalty=1.2), "seen"),
        (lambda x: next_token(x, top_p=0.0), "top_p"),
    ],
)
def test_bad_input_is_named(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(_logits())


def test_bad_types_are_named() -> None:
    with pytest.raises(TypeError, match="floating"):
        top_k_filter(torch.ones(2, 3, dtype=torch.long), 1)
    with pytest.raises(TypeError, match="seen"):
        repetition_penalty(_logits(), torch.zeros(6, 2), 1.2)
