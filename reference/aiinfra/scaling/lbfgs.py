"""L-BFGS over a batch of independent problems, one per row of a tensor.

Hoffmann et al. (2022, Sec. D.2) fit their scaling law by running L-BFGS from each
point of a grid of starts and keeping the best end point. The problems share no
parameters, so here they run side by side: ``x`` is ``(S, k)``, one start per row,
``f(x)`` returns the ``(S,)`` objectives, and every row keeps its own curvature
history, step length and stopping test. The direction is Nocedal & Wright's
two-loop recursion (Algorithm 7.4) with their initial scaling (Eq. 7.20); the step
is a backtracking line search to the Armijo condition (Algorithm 3.1). A row whose
pair (s, y) has no positive curvature stores zeros, which the recursion skips.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Objective = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _value_and_grad(
    f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``f(x)`` (S,) and its gradient (S, k).

    The rows are independent, so the gradient of their sum is each row's own.
    """
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        fx = f(x)  # (S,)
        (g,) = torch.autograd.grad(fx.sum(), x)
    return fx.detach(), g


def _direction(
    g: torch.Tensor,
    s: torch.Tensor,
    y: torch.Tensor,
    rho: torch.Tensor,
    gamma: torch.Tensor,
    newest: int,
) -> torch.Tensor:
    """-H g by the two-loop recursion, newest pair first; s, y are (S, m, k)."""
    m = s.shape[1]
    order = [(newest - i) % m for i in range(m)]
    q = g.clone()  # (S, k)
    alphas = []
    for i in order:
        a_i = rho[:, i] * (s[:, i] * q).sum(-1)  # (S,)
        q -= a_i[:, None] * y[:, i]
        alphas.append(a_i)
    r = gamma[:, None] * q  # H_0 = gamma I
    for i, a_i in zip(reversed(order), reversed(alphas), strict=True):
        b_i = rho[:, i] * (y[:, i] * r).sum(-1)
        r += s[:, i] * (a_i - b_i)[:, None]
    return -r


def lbfgs(
    f: Objective,
    x0: torch.Tensor,
    max_iter: int = 500,
    history: int = 10,
    tol: float = 1e-10,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimise each row's objective from its start.

    Args:
        f: ``f(x, rows)`` maps ``(S', k)`` points of the problems ``rows`` (S',) to
            their ``(S',)`` objectives; row ``i`` of the output depends on row ``i``
            of ``x`` only. Only the rows still running are evaluated.
        x0: ``(S, k)`` starting points.
        max_iter: iterations at most.
        history: curvature pairs kept per row (m).
        tol: a row stops when an iteration lowers its objective by less than
            ``tol * |f|``, its largest gradient entry is below ``tol``, or no step
            along its direction descends.

    Returns:
        ``(x, fx)``: ``(S, k)`` end points and their ``(S,)`` objectives.

    Raises:
        ValueError: ``x0`` is not a 2-D floating tensor, or a count is < 1.
    """
    if x0.ndim != 2 or not x0.is_floating_point():
        raise ValueError(f"x0 must be a 2-D float tensor (S, k), got {x0.shape}")
    if max_iter < 1 or history < 1:
        raise ValueError(
            f"max_iter and history must be >= 1, got {max_iter}, {history}"
        )
    n_rows, k = x0.shape
    rows = torch.arange(n_rows, device=x0.device)
    x = x0.detach().clone()
    fx, g = _value_and_grad(lambda z: f(z, rows), x)
    s = x.new_zeros(n_rows, history, k)
    y = x.new_zeros(n_rows, history, k)
    rho = x.new_zeros(n_rows, history)
    gamma = 1 / g.norm(dim=-1).clamp_min(1e-300)  # first step: unit length
    active = torch.isfinite(fx)
    for it in range(max_iter):
        r = rows[active]  # the problems still running
        if len(r) == 0:
            break
        d = _direction(g[r], s[r], y[r], rho[r], gamma[r], (it - 1) % history)
        slope = (g[r] * d).sum(-1)  # (S',)
        t = torch.where(slope < 0, 1.0, 0.0).to(x)
        todo = slope < 0
        for _ in range(50):  # halve each row's step until it descends enough
            j = todo.nonzero().squeeze(-1)
            if len(j) == 0:
                break
            f_try = f(x[r[j]] + t[j, None] * d[j], r[j])
            ok = torch.isfinite(f_try) & (f_try <= fx[r[j]] + 1e-4 * t[j] * slope[j])
            t[j] = torch.where(ok, t[j], t[j] / 2)
            todo[j] = ~ok
        t = torch.where(todo, 0.0, t)  # no descent found: the row stops
        x_new = x[r] + t[:, None] * d
        f_new, g_new = _value_and_grad(lambda z: f(z, r), x_new)  # noqa: B023
        step, dg = x_new - x[r], g_new - g[r]
        sy = (step * dg).sum(-1)
        keep = (sy > 1e-300) & (t > 0)  # positive curvature: store the pair
        slot = it % history
        s[r, slot] = torch.where(keep[:, None], step, 0.0)
        y[r, slot] = torch.where(keep[:, None], dg, 0.0)
        rho[r, slot] = torch.where(keep, 1 / sy.where(keep, 1.0), 0.0)
        gamma[r] = torch.where(keep, sy / (dg * dg).sum(-1).clamp_min(1e-300), gamma[r])
        moved = t > 0
        decrease = fx[r] - f_new
        x[r] = torch.where(moved[:, None], x_new, x[r])
        g[r] = torch.where(moved[:, None], g_new, g[r])
        fx[r] = torch.where(moved, f_new, fx[r])
        small = (decrease <= tol * fx[r].abs()) | (g[r].abs().amax(-1) < tol)
        active[r] = moved & ~small
    return x, fx
