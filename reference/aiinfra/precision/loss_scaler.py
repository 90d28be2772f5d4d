"""Dynamic loss scaling: keep fp16 gradients out of the underflow zone.

Gradients of a network trained in fp16 are often smaller than fp16's smallest
subnormal and would round to zero. Multiplying the loss by a scale sigma multiplies
every gradient by sigma (the chain rule is linear), lifting them into range; the
optimizer divides by sigma again, in fp32, before it updates (Micikevicius et al.
2018, Sec. 3.2). A fixed sigma risks overflow, so the scaler adapts it: if any
gradient is inf or NaN the step is skipped and sigma is multiplied by the backoff
factor (0.5); after ``growth_interval`` consecutive clean steps sigma is multiplied
by the growth factor (2). This is the rule of ``torch.amp.GradScaler``, whose
defaults are used here; bf16, with fp32's exponent range, does not need it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

FP32_MAX = torch.finfo(torch.float32).max


class DynamicLossScaler:
    """Scale the loss, unscale and check the gradients, adapt the scale.

    Used like ``GradScaler``: ``scaler.scale(loss).backward()``,
    ``scaler.step(optimizer)``, ``scaler.update()``.

    Args:
        init_scale: sigma at the start.
        growth_factor: multiplies sigma after ``growth_interval`` clean steps (> 1).
        backoff_factor: multiplies sigma after a step with inf/NaN gradients (0 to 1).
        growth_interval: clean steps in a row before sigma grows (>= 1).

    Raises:
        ValueError: a factor or the interval is out of range.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ) -> None:
        if init_scale <= 0 or growth_factor <= 1 or not 0 < backoff_factor < 1:
            raise ValueError(
                "need init_scale > 0, growth_factor > 1 and 0 < backoff_factor < 1"
            )
        if growth_interval < 1:
            raise ValueError(f"growth_interval must be >= 1, got {growth_interval}")
        self.scale_value = float(init_scale)
        self.growth_factor = growth_factor
        self.backoff_factor = backoff_factor
        self.growth_interval = growth_interval
        self.clean_steps = 0  # GradScaler's "growth tracker"
        self.found_inf: bool | None = None  # set by unscale_, used by update

    def get_scale(self) -> float:
        """The current loss scale sigma."""
        return self.scale_value

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """Return ``loss * sigma``; its backward gives sigma times the gradients."""
        return loss * self.scale_value

    def unscale_(self, params: Iterable[torch.Tensor]) -> bool:
        """Divide the gradients by sigma in place and report whether any is not finite.

        Args:
            params: parameters whose ``.grad`` to unscale (fp32 gradients: dividing
                in fp16 would underflow again).

        Returns:
            True if some gradient holds an inf or NaN.
        """
        found_inf = False
        inv_scale = 1.0 / self.scale_value
        with torch.no_grad():
            for p in params:
                if p.grad is None:
                    continue
                found_inf |= not bool(torch.isfinite(p.grad).all())
                p.grad.mul_(inv_scale)
        self.found_inf = found_inf
        return found_inf

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """Unscale the optimizer's gradients and step, unless one is inf/NaN.

        Args:
            optimizer: the optimizer whose ``param_groups`` hold the gradients.

        Returns:
            True if the optimizer stepped, False if the step was skipped.
        """
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if self.unscale_(params):
            return False  # skip: the update would write inf/NaN into the weights
        optimizer.step()
        return True

    def update(self) -> None:
        """Adapt sigma to this step: back off after an overflow, grow after clean runs.

        Raises:
            RuntimeError: no :meth:`unscale_` or :meth:`step` since the last update.
        """
        if self.found_inf is None:
            raise RuntimeError("update() needs a step() or unscale_() before it")
        # region adapt
        if self.found_inf:
            self.scale_value *= self.backoff_factor
            self.clean_steps = 0
        else:
            self.clean_steps += 1
            if self.clean_steps == self.growth_interval:
                grown = self.scale_value * self.growth_factor
                if grown <= FP32_MAX:  # GradScaler keeps sigma in fp32, never inf
                    self.scale_value = grown
                self.clean_steps = 0
        # endregion
        self.found_inf = None
