"""Knowledge distillation: a student learns the teacher's softened distribution.

Hinton et al. (2015, Sec. 2) train a small *student* on the *soft targets* of a large
*teacher*: both sets of logits are divided by a temperature ``temperature`` (the
paper's ``T``; the book writes it as a calligraphic T, since its ``T`` counts tokens)
before the softmax, so that the small probabilities of wrong answers, the "dark
knowledge", carry weight. The loss mixes the KL divergence to the soft targets with
the ordinary cross-entropy on the labels:

    loss = alpha * temperature**2 * KL(p || q) + (1 - alpha) * CE(labels, z),
    p = softmax(v / temperature),  q = softmax(z / temperature),

with ``v`` the teacher's logits and ``z`` the student's (the paper's letters). The
gradient of the KL term with respect to ``z`` is ``(q - p) / temperature``; the factor
``temperature**2`` keeps its size roughly independent of the temperature (the paper's
Eq. 4: for large temperatures it tends to ``(z - v) / V`` for zero-mean logits).
For a language model every position is one classification: the loss is the mean over
the positions a ``mask`` keeps (padding is dropped). MiniLLM (Gu et al. 2024) argues
for the *reverse* KL, ``KL(q || p)``, which makes the student seek the teacher's
modes instead of covering its whole distribution; ``reverse=True`` selects it.
Notation: ``B`` batch, ``T`` tokens, ``V`` vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def soft_targets(logits: Tensor, temperature: float) -> Tensor:
    """The softened distribution ``softmax(logits / temperature)`` over the last axis.

    Args:
        logits: any shape ``(..., V)``, floating point.
        temperature: ``> 0``; 1 is the model's own distribution, larger flattens it.

    Returns:
        Probabilities, the shape of ``logits``.

    Raises:
        TypeError: ``logits`` is not a floating-point tensor.
        ValueError: ``temperature`` <= 0.
    """
    _check_logits("logits", logits)
    _check_temperature(temperature)
    return torch.softmax(logits / temperature, dim=-1)


def distillation_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    labels: Tensor | None = None,
    *,
    temperature: float = 2.0,
    alpha: float = 0.5,
    mask: Tensor | None = None,
    reverse: bool = False,
) -> Tensor:
    """Hinton et al.'s distillation loss, averaged over the positions ``mask`` keeps.

    Args:
        student_logits: ``z``, shape ``(..., V)``: ``(N, V)`` for a classifier,
            ``(B, T, V)`` for a language model.
        teacher_logits: ``v``, the same shape; no gradient flows into it.
        labels: class ids, shape ``student_logits.shape[:-1]``; needed when
            ``alpha < 1``, ignored when ``alpha == 1``.
        temperature: divides both sets of logits in the KL term, ``> 0``.
        alpha: weight of the KL term, in ``[0, 1]``; ``1 - alpha`` weighs the
            cross-entropy on ``labels`` (at temperature 1).
        mask: bool, shape ``student_logits.shape[:-1]``; ``False`` drops a position
            (padding). ``None`` keeps all.
        reverse: use ``KL(q || p)`` (student to teacher, MiniLLM) instead of
            ``KL(p || q)``.

    Returns:
        The scalar loss.

    Raises:
        TypeError: logits are not floating point, ``labels`` not integer, ``mask``
            not bool.
        ValueError: ``temperature`` <= 0, ``alpha`` outside ``[0, 1]``, the shapes
            disagree, ``labels`` is missing while ``alpha < 1``, or ``mask`` keeps
            no position.
    """
    _check_logits("student_logits", student_logits)
    _check_logits("teacher_logits", teacher_logits)
    _check_temperature(temperature)
    if isinstance(alpha, bool) or not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student_logits {tuple(student_logits.shape)} and teacher_logits "
            f"{tuple(teacher_logits.shape)} must have the same shape"
        )
    positions = student_logits.shape[:-1]
    if alpha < 1.0:
        if labels is None:
            raise ValueError(f"labels are needed when alpha < 1 (alpha = {alpha})")
        _check_positions("labels", labels, positions, integer=True)
    if mask is not None:
        _check_positions("mask", mask, positions, integer=False)
        if not mask.any():
            raise ValueError("mask must keep at least one position")
    # region kd-loss
    z = student_logits.reshape(-1, student_logits.shape[-1])  # (N, V)
    v = teacher_logits.detach().reshape(z.shape)  # (N, V)
    keep = None if mask is None else mask.reshape(-1)  # (N,)
    log_q = F.log_softmax(z / temperature, dim=-1)  # student, softened
    log_p = F.log_softmax(v / temperature, dim=-1)  # teacher, softened
    if reverse:  # KL(q || p): mode-seeking (MiniLLM)
        kl = (log_q.exp() * (log_q - log_p)).sum(-1)  # (N,)
    else:  # KL(p || q): Hinton et al.
        kl = (log_p.exp() * (log_p - log_q)).sum(-1)  # (N,)
    loss = alpha * temperature**2 * _mean(kl, keep)
    if alpha < 1.0:
        ce = F.cross_entropy(z, labels.reshape(-1), reduction="none")  # (N,)
        loss = loss + (1.0 - alpha) * _mean(ce, keep)
    # endregion
    return loss


def _mean(x: Tensor, keep: Tensor | None) -> Tensor:
    """Mean of ``x`` (N,) over the kept positions."""
    return x.mean() if keep is None else x[keep].mean()


def _check_logits(name: str, x: object) -> None:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        kind = x.dtype if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"{name} must be a floating-point torch.Tensor, got {kind}")
    if x.dim() < 1 or x.shape[-1] < 1:
        raise ValueError(f"{name} must have shape (..., V) with V >= 1")


def _check_temperature(temperature: float) -> None:
    if isinstance(temperature, bool) or not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}")


def _check_positions(
    name: str, x: object, positions: torch.Size, *, integer: bool
) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    ok = x.dtype == torch.bool if not integer else not x.is_floating_point()
    if not ok or (integer and x.dtype == torch.bool):
        want = "integer class ids" if integer else "bool"
        raise TypeError(f"{name} must be {want}, got {x.dtype}")
    if x.shape != positions:
        raise ValueError(
            f"{name} must have shape {tuple(positions)} (the logits' without V), "
            f"got {tuple(x.shape)}"
        )
