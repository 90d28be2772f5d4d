"""The toy task that every data-parallel example of the book trains.

Data parallelism does not care what the model computes, only that the loss is a mean
over the batch, so the examples use the smallest model that has several layers (and
so several gradients arriving one after another in backward): a multi-layer
perceptron with tanh activations, fitted to random targets by mean squared error.
Each rank takes a contiguous 1/N of every batch; the mean of the N local losses is the
loss of the whole batch when the shares are equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


def mlp(
    widths: Sequence[int], seed: int = 0, device: torch.device | str | None = None
) -> nn.Sequential:
    """Linear layers ``widths[0] -> widths[1] -> ...`` with tanh between them.

    The weights are ``nn.Linear``'s own initialisation (Kaiming-uniform weights,
    biases uniform in +-1/sqrt(fan_in)) drawn on the CPU from a generator seeded with
    ``seed``, layer by layer, so the model is the same on every device and the global
    random state is left alone.

    Args:
        widths: layer widths, input first.
        seed: seed of the initialisation; ranks that pass different seeds start
            from different replicas.
        device: where the parameters go (default: the CPU).

    Raises:
        ValueError: fewer than two widths, or a width < 1.
    """
    if len(widths) < 2 or any(w < 1 for w in widths):
        raise ValueError(f"widths must be >= 2 positive ints, got {widths!r}")
    g = torch.Generator().manual_seed(seed)
    layers: list[nn.Module] = []
    for d_in, d_out in zip(widths[:-1], widths[1:], strict=True):
        linear = nn.utils.skip_init(nn.Linear, d_in, d_out)  # no global draws
        # The draws of nn.Linear.reset_parameters, from our generator.
        nn.init.kaiming_uniform_(linear.weight, a=math.sqrt(5), generator=g)
        bound = 1 / math.sqrt(d_in)
        nn.init.uniform_(linear.bias, -bound, bound, generator=g)
        layers += [linear, nn.Tanh()]
    return nn.Sequential(*layers[:-1]).to(device)  # no activation after the last


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
