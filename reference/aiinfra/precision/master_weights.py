"""FP32 master weights behind a half-precision model.

Forward and backward run on 16-bit weights, but the update must not: an update
smaller than half the gap between a weight and its neighbour (eps/2 relative) rounds
away, step after step, and the weight never moves. Mixed-precision training
therefore keeps an fp32 master copy of every weight; the optimizer reads the 16-bit
gradients (converted to fp32), updates the master copy, and the model gets a freshly
rounded 16-bit copy (Micikevicius et al. 2018, Sec. 3.1). The master copy is 4 of
the K = 12 optimizer bytes per parameter that ZeRO partitions. With a
:class:`aiinfra.precision.loss_scaler.DynamicLossScaler`, the gradients are unscaled
after they are copied to fp32, so the division cannot underflow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from aiinfra.precision.loss_scaler import DynamicLossScaler


class MasterWeights:
    """An optimizer over fp32 copies of a 16-bit model's parameters.

    Args:
        params: the model's parameters (bf16 or fp16).
        make_optimizer: builds the inner optimizer from the fp32 master parameters,
            e.g. ``lambda ps: torch.optim.AdamW(ps, lr=1e-3)``.

    Attributes:
        params: the model's parameters.
        master: their fp32 master copies, in the same order.
        optimizer: the inner optimizer; ``param_groups`` and ``state`` are its own.

    Raises:
        TypeError: a parameter is not floating point.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    ) -> None:
        self.params = list(params)
        for p in self.params:
            if not p.is_floating_point():
                raise TypeError(f"parameter of dtype {p.dtype} is not floating point")
        self.master = [
            p.detach().to(torch.float32).clone().requires_grad_(True)
            for p in self.params
        ]
        self.optimizer = make_optimizer(self.master)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The inner optimizer's parameter groups (over the master copies)."""
        return self.optimizer.param_groups

    @property
    def state(self) -> Any:
        """The inner optimizer's state (momentum, variance, ...)."""
        return self.optimizer.state

    def zero_grad(self) -> None:
        """Drop the model's gradients."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, scaler: DynamicLossScaler | None = None) -> bool:
        """Update the fp32 masters from the 16-bit gradients and refresh the model.

        Args:
            scaler: if given, the gradients were computed from ``scaler.scale(loss)``;
                they are unscaled in fp32 and the step is skipped on inf/NaN.
                ``scaler.update()`` is left to the caller, as with ``GradScaler``.

        Returns:
            True if the weights were updated, False if the step was skipped.
        """
        # region master-step
        for p, m in zip(self.params, self.master, strict=True):
            m.grad = None if p.grad is None else p.grad.to(torch.float32)
        if scaler is None:
            self.optimizer.step()
            stepped = True
        else:
            stepped = scaler.step(self.optimizer)  # unscale in fp32, maybe skip
        if stepped:
            for p, m in zip(self.params, self.master, strict=True):
                p.copy_(m)  # round the fp32 master to the model's 16 bits
        for m in self.master:
            m.grad = None  # the fp32 gradient copy lives only during the step
        # endregion
        return stepped
