"""The toy task that every data-parallel example of the book trains.

Data parallelism does not care what the model computes, only that the loss is a mean
over the batch, so the examples use the smallest model that has several layers (and
so several gradients arriving one after another in backward): a multi-layer
perceptron with tanh activations, fitted to random targets by mean squared error.
Each rank takes a contiguous 1/N of every batch; the mean of the N local losses is the
loss of the whole batch when the shares are equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def mlp(widths: Sequence[int], seed: int = 0) -> nn.Sequential:
    """Linear layers ``widths[0] -> widths[1] -> ...`` with tanh between them.

    Raises:
        ValueError: fewer than two widths, or a width < 1.
    """
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise ValueError(f"widths must be >= 2 positive ints, got {widths!r}")
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for d_in, d_out in zip(widths[:-1], widths[1:], strict=True):
        layers += [nn.Linear(d_in, d_out), nn.Tanh()]
    return nn.Sequential(*layers[:-1])  # no activation after the last layer


def regression_batches(
    n_steps: int, batch: int, d_in: int, d_out: int, seed: int = 1234
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n_steps`` batches ``(x, y)`` of shapes (batch, d_in) and (batch, d_out)."""
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch, d_in, generator=g), torch.randn(batch, d_out, generator=g))
        for _ in range(n_steps)
    ]


def rank_share(t: torch.Tensor, rank: int, n_ranks: int) -> torch.Tensor:
    """Rows ``[rank B/N, (rank + 1) B/N)`` of ``t`` (B, ...).

    Raises:
        ValueError: B is not divisible by ``n_ranks``.
    """
    if t.shape[0] % n_ranks:
        raise ValueError(f"batch {t.shape[0]} is not divisible by n_ranks={n_ranks}")
    share = t.shape[0] // n_ranks
    return t[rank * share : (rank + 1) * share]  # (B / N, ...)
