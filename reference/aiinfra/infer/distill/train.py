"""A measured distillation: a small teacher, and one student trained two ways.

The data is a synthetic language with real structure and known probabilities, made
from a fixed generator, so nothing is downloaded: a second-order Markov chain over
``V`` tokens in which each token ``b`` allows ``branching`` successors, whose
probabilities depend on the token ``a`` before ``b`` too. The teacher, a small
:class:`~aiinfra.models.transformer.Transformer`, is trained on a large corpus (as
released teachers are). Two copies of a smaller student, same initial weights, same
batches, are then trained on a small *transfer set* only: one on the labels (the
next tokens), one on :func:`~aiinfra.infer.distill.loss.distillation_loss` with the
teacher's logits (Hinton et al. 2015). Every model's cross-entropy on held-out
sequences is recorded as it trains; the chain's own cross-entropy on them (its true
probabilities) is the floor. A sequence's first token is uniform, so a mask drops
the first prediction from every loss. ``aiinfra distill`` runs
:func:`run_distillation` (well under a minute on two CPU cores); its stamped result
is the kind ``distillation`` of :mod:`aiinfra.results`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra import progress
from aiinfra.infer.distill.loss import distillation_loss
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer

KIND = "distillation"  # its kind of aiinfra.results
MODELS = ("teacher", "labels", "distilled")  # the three training runs


@dataclass(frozen=True)
class DistillRunConfig:
    """The experiment: the language, the two model shapes, the data and training."""

    vocab: int = 32  # V, tokens of the synthetic language
    branching: int = 4  # successors a token allows
    spread: float = 1.5  # std of the log-weights of those successors
    seq_len: int = 32  # T, tokens per sequence
    teacher_seqs: int = 2048  # the teacher's corpus
    transfer_seqs: int = 48  # the students' data: small, so labels alone over-fit
    heldout_seqs: int = 256
    teacher_width: int = 64  # h of the teacher
    teacher_layers: int = 2
    student_width: int = 32  # h of the student
    student_layers: int = 1
    teacher_steps: int = 300
    student_steps: int = 200
    batch: int = 32  # B, sequences per step
    lr: float = 3e-3  # AdamW, constant
    temperature: float = 2.0
    alpha: float = 0.9  # weight of the KL term
    eval_every: int = 25
    seed: int = 0
    threads: int = 1  # tiny matrices: more threads only add overhead

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (isinstance(value, bool) or not value >= 1):
                if f.name != "seed":
                    raise ValueError(f"{f.name} must be an integer >= 1, got {value!r}")
        if self.seq_len < 3:
            raise ValueError(
                f"seq_len must be >= 3 (two context tokens), got {self.seq_len}"
            )
        if self.transfer_seqs > self.teacher_seqs:
            raise ValueError(
                f"transfer_seqs ({self.transfer_seqs}) must be <= teacher_seqs "
                f"({self.teacher_seqs}): the transfer set is part of the corpus"
            )
        if not 0.0 <= self.alpha <= 1.0 or not self.temperature > 0:
            raise ValueError(
                f"alpha must be in [0, 1] and temperature > 0, got {self.alpha}, "
                f"{self.temperature}"
            )


def markov_language(
    vocab: int, branching: int, spread: float, generator: torch.Generator
) -> Tensor:
    """The chain's probabilities ``P[a, b, c]`` of token ``c`` after ``a, b``.

    Args:
        vocab: tokens ``V``.
        branching: successors allowed after each ``b`` (the same for every ``a``).
        spread: standard deviation of the successors' log-weights in each row.
        generator: the source of randomness.

    Returns:
        Shape ``(V, V, V)``; each ``[a, b]`` row sums to 1 and has ``branching``
        non-zero entries, at the same tokens for every ``a``.

    Raises:
        ValueError: ``branching`` not in ``[1, vocab]`` or ``spread`` < 0.
    """
    if not 1 <= branching <= vocab:
        raise ValueError(f"branching must be in [1, vocab={vocab}], got {branching}")
    if not spread >= 0:
        raise ValueError(f"spread must be >= 0, got {spread}")
    allowed = torch.rand(vocab, vocab, generator=generator).argsort(-1)  # (V, V)
    allowed = allowed[:, :branching].expand(vocab, vocab, branching)  # (V, V, k)
    logw = spread * torch.randn(vocab, vocab, branching, generator=generator)
    probs = torch.zeros(vocab, vocab, vocab)
    probs.scatter_(2, allowed, logw.softmax(-1))  # (V, V, V)
    return probs


def sample_sequences(
    probs: Tensor, n: int, seq_len: int, generator: torch.Generator
) -> Tensor:
    """``n`` sequences of the chain: two uniform tokens, then ``P[a, b]`` each step.

    Args:
        probs: the chain, shape ``(V, V, V)`` (:func:`markov_language`).
        n: sequences, ``>= 1``.
        seq_len: tokens per sequence, ``>= 2``.
        generator: the source of randomness.

    Returns:
        Token ids, shape ``(n, seq_len)``.

    Raises:
        ValueError: ``probs`` is not ``(V, V, V)``, ``n`` < 1 or ``seq_len`` < 2.
    """
    V = probs.shape[0]
    if probs.shape != (V, V, V):
        raise ValueError(f"probs must have shape (V, V, V), got {tuple(probs.shape)}")
    if n < 1 or seq_len < 2:
        raise ValueError(f"n must be >= 1 and seq_len >= 2, got {n}, {seq_len}")
    x = torch.randint(0, V, (n, 2), generator=generator)  # (n, 2)
    out = [x[:, 0], x[:, 1]]
    for _ in range(seq_len - 2):
        rows = probs[out[-2], out[-1]]  # (n, V)
        out.append(torch.multinomial(rows, 1, generator=generator).squeeze(1))
    return torch.stack(out, dim=1)  # (n, seq_len)


def source_loss(probs: Tensor, tokens: Tensor) -> float:
    """The chain's own cross-entropy on ``tokens`` (nats per structured token)."""
    p = probs[tokens[:, :-2], tokens[:, 1:-1], tokens[:, 2:]]  # (n, T - 2)
    return float(-p.log().mean())


def heldout_loss(model: Transformer, tokens: Tensor) -> float:
    """A model's cross-entropy on ``tokens`` (nats per structured token)."""
    with torch.no_grad():
        logits = model(tokens[:, :-1])[:, 1:]  # (n, T - 2, V): first position dropped
        return float(F.cross_entropy(logits.flatten(0, 1), tokens[:, 2:].flatten()))


def _model(width: int, layers: int, c: DistillRunConfig) -> Transformer:
    heads = max(1, width // 16)
    d_ff = 8 * width // 3 // 8 * 8  # about (8/3) h, as Llama's SwiGLU
    return Transformer(
        TransformerConfig(
            c.vocab, width, layers, heads, d_ff=d_ff, max_seq_len=c.seq_len
        )
    )


def train(
    model: Transformer,
    data: Tensor,
    heldout: Tensor,
    c: DistillRunConfig,
    steps: int,
    teacher: Transformer | None = None,
) -> list[float]:
    """Train on batches of ``data``; return the held-out loss every ``eval_every``.

    With a ``teacher`` the loss is the distillation loss (``c.temperature``,
    ``c.alpha``), else the cross-entropy on the next tokens. Batches come from a
    generator seeded with ``c.seed``, so two students see the same batches.
    """
    g = torch.Generator().manual_seed(c.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=c.lr, weight_decay=0.0)
    mask = torch.ones(c.batch, c.seq_len - 1, dtype=torch.bool)
    mask[:, 0] = False  # position 0 predicts the second token, which is uniform
    curve = [heldout_loss(model, heldout)]
    for step in progress.track(range(1, steps + 1), "training steps"):
        x = data[torch.randint(0, len(data), (c.batch,), generator=g)]  # (B, T)
        z = model(x[:, :-1])  # (B, T - 1, V)
        if teacher is None:
            loss = F.cross_entropy(z[:, 1:].flatten(0, 1), x[:, 2:].flatten())
        else:
            with torch.no_grad():
                v = teacher(x[:, :-1])  # (B, T - 1, V)
            loss = distillation_loss(
                z, v, x[:, 1:], temperature=c.temperature, alpha=c.alpha, mask=mask
            )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % c.eval_every == 0:
            curve.append(heldout_loss(model, heldout))
    return curve


def run_distillation(config: DistillRunConfig | None = None) -> dict[str, Any]:
    """Train the teacher, then the student on labels alone and with distillation.

    Args:
        config: the experiment (default: the book's); its fields are checked
            when it is made (``ValueError``).

    Returns:
        ``{"example", "config", "source_loss", "parameters", "curves", "final",
        "best"}``: held-out losses (nats per token) of ``teacher``, ``labels`` and
        ``distilled`` every ``eval_every`` steps, the last and the lowest of each;
        ``example`` holds the teacher's logits and the true probabilities after
        the two-token context most frequent in the teacher's corpus.
    """
    c = config or DistillRunConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(c.threads)
    try:
        return _run(c)
    finally:
        torch.set_num_threads(threads)  # the caller's setting, restored


def _run(c: DistillRunConfig) -> dict[str, Any]:
    g = torch.Generator().manual_seed(c.seed)
    probs = markov_language(c.vocab, c.branching, c.spread, g)
    corpus = sample_sequences(probs, c.teacher_seqs, c.seq_len, g)
    transfer = corpus[: c.transfer_seqs]  # the students see a small part of it
    heldout = sample_sequences(probs, c.heldout_seqs, c.seq_len, g)
    with torch.random.fork_rng(devices=[]):  # weights from the seed, global state kept
        torch.random.default_generator.manual_seed(c.seed)
        teacher = _model(c.teacher_width, c.teacher_layers, c)
        student = _model(c.student_width, c.student_layers, c)
    twin = _model(c.student_width, c.student_layers, c)
    twin.load_state_dict(student.state_dict())  # the same initial student, twice
    curves = {"teacher": train(teacher, corpus, heldout, c, c.teacher_steps)}
    teacher.eval()
    curves["labels"] = train(student, transfer, heldout, c, c.student_steps)
    curves["distilled"] = train(twin, transfer, heldout, c, c.student_steps, teacher)
    # The soft-target figure's context: the pair (a, b) most frequent in the corpus.
    pairs = corpus[:, :-2] * c.vocab + corpus[:, 1:-1]  # (n, T - 2) ids of (a, b)
    a, b = divmod(int(pairs.flatten().bincount().argmax()), c.vocab)
    with torch.no_grad():
        v = teacher(torch.tensor([[a, b]]))[0, -1]  # (V,): the teacher's logits
    return {
        "example": {
            "context": [a, b],
            "teacher_logits": v.tolist(),
            "source_probs": probs[a, b].tolist(),
        },
        "config": asdict(c),
        "source_loss": source_loss(probs, heldout),
        "parameters": {
            "teacher": sum(p.numel() for p in teacher.parameters()),
            "student": sum(p.numel() for p in student.parameters()),
        },
        "curves": curves,
        "final": {k: v[-1] for k, v in curves.items()},
        "best": {k: min(v) for k, v in curves.items()},
    }
