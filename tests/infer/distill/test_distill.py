"""The distillation loss against PyTorch's KL and a hand example; a tiny KD run."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from aiinfra import results
from aiinfra.infer.distill.loss import distillation_loss, soft_targets
from aiinfra.infer.distill.train import (
    KIND,
    DistillRunConfig,
    markov_language,
    run_distillation,
    sample_sequences,
    source_loss,
)


def _logits(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64) * 3


def test_soft_targets_by_hand() -> None:
    # logits (0, ln 2, ln 4): probabilities (1, 2, 4) / 7 at T = 1, (1, 2^½, 2) at T = 2
    v = torch.tensor([0.0, math.log(2), math.log(4)], dtype=torch.float64)
    assert torch.allclose(
        soft_targets(v, 1.0), torch.tensor([1.0, 2, 4], dtype=v.dtype) / 7
    )
    s2 = torch.tensor([1, math.sqrt(2), 2], dtype=torch.float64)
    assert torch.allclose(soft_targets(v, 2.0), s2 / s2.sum())


def test_hand_example() -> None:
    # One position, V = 2, alpha = 1, T = 1: KL((1/2, 1/2) || (1/(1+e), e/(1+e))).
    z = torch.tensor([[0.0, 1.0]], dtype=torch.float64)
    v = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    q1 = 1 / (1 + math.e)
    want = 0.5 * math.log(0.5 / q1) + 0.5 * math.log(0.5 / (1 - q1))
    got = distillation_loss(z, v, temperature=1.0, alpha=1.0)
    assert got.item() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 1.0])
def test_matches_kl_div_and_cross_entropy(temperature: float, alpha: float) -> None:
    z, v = _logits(2, 5, 7), _logits(2, 5, 7, seed=1)  # (B, T, V)
    labels = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[0, 3:] = False  # padding at the end of the first sequence
    zk, vk, yk = z[mask], v[mask], labels[mask]  # (N, V), the kept positions
    kl = F.kl_div(
        F.log_softmax(zk / temperature, -1),
        F.softmax(vk / temperature, -1),
        reduction="batchmean",
    )
    want = alpha * temperature**2 * kl + (1 - alpha) * F.cross_entropy(zk, yk)
    got = distillation_loss(
        z, v, labels, temperature=temperature, alpha=alpha, mask=mask
    )
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-14)


def test_reverse_kl_matches_kl_div() -> None:
    z, v = _logits(6, 9), _logits(6, 9, seed=1)
    want = F.kl_div(
        F.log_softmax(v / 2, -1),
        F.log_softmax(z / 2, -1),
        reduction="batchmean",
        log_target=True,
    )  # KL(q || p): the student's distribution is the "target" of kl_div
    got = distillation_loss(z, v, temperature=2.0, alpha=1.0, reverse=True)
    assert torch.allclose(got, 4 * want, rtol=1e-12)
    forward = distillation_loss(z, v, temperature=2.0, alpha=1.0)
    assert not torch.allclose(got, forward)  # the two directions differ


def test_gradient_at_unit_temperature_is_q_minus_p() -> None:
    z = _logits(1, 11).requires_grad_()
    v = _logits(1, 11, seed=1)
    distillation_loss(z, v, temperature=1.0, alpha=1.0).backward()
    want = torch.softmax(z.detach(), -1) - torch.softmax(v, -1)
    assert torch.allclose(z.grad, want, rtol=1e-12, atol=1e-15)
    assert v.grad is None  # the teacher gets no gradient


@pytest.mark.parametrize("temperature", [20.0, 200.0])
def test_t_squared_keeps_gradient_near_high_temperature_limit(
    temperature: float,
) -> None:
    # Hinton et al., Eq. 4: for zero-mean logits, the gradient of T^2 KL tends to
    # (z - v) / V as T grows: its size no longer depends on T.
    V = 10
    z, v = _logits(1, V), _logits(1, V, seed=1)
    z, v = (z - z.mean()).requires_grad_(), v - v.mean()
    distillation_loss(z, v, temperature=temperature, alpha=1.0).backward()
    limit = (z.detach() - v) / V
    err = (z.grad - limit).norm() / limit.norm()
    assert err < 3.0 / temperature  # the next term of the expansion is O(1/T)


def test_gradient_without_t_squared_shrinks_as_one_over_t_squared() -> None:
    z, v = _logits(1, 10), _logits(1, 10, seed=1)
    norms = []
    for temperature in (20.0, 200.0):
        zz = z.clone().requires_grad_()
        # the KL term alone: divide out the T^2 the loss applies
        (
            distillation_loss(zz, v, temperature=temperature, alpha=1.0)
            / temperature**2
        ).backward()
        norms.append(zz.grad.norm().item())
    assert norms[0] / norms[1] == pytest.approx(100.0, rel=0.1)


def test_mask_drops_padding_positions() -> None:
    z, v = _logits(1, 4, 5), _logits(1, 4, 5, seed=1)
    mask = torch.tensor([[True, True, False, False]])
    junk = z.clone()
    junk[0, 2:] = 1e3  # whatever the padded positions hold
    a = distillation_loss(z, v, temperature=2.0, alpha=1.0, mask=mask)
    b = distillation_loss(junk, v, temperature=2.0, alpha=1.0, mask=mask)
    c = distillation_loss(z[:, :2], v[:, :2], temperature=2.0, alpha=1.0)
    assert torch.equal(a, b) and torch.allclose(a, c)


def test_bad_input() -> None:
    z, v = _logits(2, 3, 5), _logits(2, 3, 5, seed=1)
    y = torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        distillation_loss(z, v, y, temperature=0.0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        soft_targets(z, -1.0)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        distillation_loss(z, v, y, alpha=1.5)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        distillation_loss(z, v, y, alpha=-0.1)
    with pytest.raises(ValueError, match="same shape"):
        distillation_loss(z, v[:, :2], y)
    with pytest.raises(ValueError, match="labels are needed"):
        distillation_loss(z, v, alpha=0.5)
    with pytest.raises(ValueError, match="labels must have shape"):
        distillation_loss(z, v, y[:, :2])
    with pytest.raises(TypeError, match="labels must be integer"):
        distillation_loss(z, v, y.double())
    with pytest.raises(TypeError, match="mask must be bool"):
        distillation_loss(z, v, y, mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask must have shape"):
        distillation_loss(z, v, y, mask=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="at least one position"):
        distillation_loss(z, v, y, mask=torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="student_logits must be a floating-point"):
        distillation_loss(y, v, y)
    with pytest.raises(TypeError, match="logits must be a floating-point"):
        soft_targets([1.0, 2.0], 1.0)


def test_markov_language_rows_and_support() -> None:
    g = torch.Generator().manual_seed(0)
    probs = markov_language(12, 3, 1.0, g)
    assert torch.allclose(probs.sum(-1), torch.ones(12, 12))
    support = probs > 0
    assert (support.sum(-1) == 3).all()
    assert (support == support[0:1]).all()  # successors depend on b only
    with pytest.raises(ValueError, match="branching must be in"):
        markov_language(12, 13, 1.0, g)
    with pytest.raises(ValueError, match="spread must be >= 0"):
        markov_language(12, 3, -1.0, g)


def test_sampled_sequences_follow_the_chain() -> None:
    g = torch.Generator().manual_seed(0)
    probs = markov_language(6, 2, 1.0, g)
    x = sample_sequences(probs, 400, 12, g)  # (400, 12)
    assert (probs[x[:, :-2], x[:, 1:-1], x[:, 2:]] > 0).all()  # never off support
    # the empirical cross-entropy of the source is near its entropy rate
    h = -(probs * probs.clamp_min(1e-30).log()).sum(-1)  # (V, V) row entropies
    rate = float(h[x[:, :-2], x[:, 1:-1]].mean())
    assert source_loss(probs, x) == pytest.approx(rate, abs=0.05)


TINY = DistillRunConfig(
    vocab=16,
    seq_len=16,
    teacher_seqs=512,
    transfer_seqs=16,
    heldout_seqs=64,
    teacher_width=32,
    student_width=16,
    teacher_layers=1,
    teacher_steps=40,
    student_steps=30,
    eval_every=30,
    batch=16,
    lr=1e-2,
)


def test_distilled_student_beats_label_only_student() -> None:
    r = run_distillation(TINY)
    final = r["final"]
    assert final["distilled"] < final["labels"] - 0.2  # nats per token
    assert r["source_loss"] < final["teacher"] < final["labels"]


def test_committed_result_shows_the_gain() -> None:
    r = results.load(KIND, "cpu")
    assert r["final"]["distilled"] < r["best"]["labels"]  # even with early stopping
    assert r["source_loss"] < r["best"]["teacher"]
    with pytest.raises(FileNotFoundError, match="aiinfra distill"):
        results.load(KIND, "cpu", "/nonexistent/distillation.json")


def test_run_config_and_sampler_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="vocab must be an integer >= 1"):
        DistillRunConfig(vocab=0)
    with pytest.raises(ValueError, match="seq_len must be >= 3"):
        DistillRunConfig(seq_len=2)
    with pytest.raises(ValueError, match="transfer_seqs .* must be <= teacher_seqs"):
        DistillRunConfig(transfer_seqs=10, teacher_seqs=5)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        DistillRunConfig(alpha=1.5)
    g = torch.Generator().manual_seed(0)
    probs = markov_language(4, 2, 1.0, g)
    with pytest.raises(ValueError, match="probs must have shape"):
        sample_sequences(probs[0], 3, 5, g)
    with pytest.raises(ValueError, match="n must be >= 1 and seq_len >= 2"):
        sample_sequences(probs, 0, 5, g)
