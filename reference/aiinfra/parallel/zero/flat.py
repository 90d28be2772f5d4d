"""ZeRO's units: a module's own parameters as one flat buffer, padded to N_d shards.

Each module's own parameters form one *unit* (:func:`module_units`), flattened into
a buffer padded to N_d Psi_s elements so that any Psi_u works (the layout FSDP
uses, Zhao et al. 2023); every parameter becomes a view of it (:class:`FlatUnit`),
so forward and backward read the flat buffer, and a rank's shard of the unit is one
slice of it. The three stages (:mod:`aiinfra.parallel.zero.stage1`, ``stage2``,
``stage3``) and their optimizer (:mod:`aiinfra.parallel.zero.optim`) work on units.
Notation: Psi_u parameters in unit u, N_d ranks, Psi_s = ceil(Psi_u / N_d) per shard.
"""

from __future__ import annotations

import torch
from torch import nn


def module_units(module: nn.Module) -> list[tuple[nn.Module, list[nn.Parameter]]]:
    """Return ``(submodule, its own trainable parameters)`` for each module with some.

    Raises:
        ValueError: a parameter is shared by two modules (tied weights).
    """
    units, seen = [], set()
    for sub in module.modules():
        params = [p for p in sub.parameters(recurse=False) if p.requires_grad]
        if any(p in seen for p in params):
            raise ValueError(f"module: a parameter of {type(sub).__name__} is shared")
        seen.update(params)
        if params:
            units.append((sub, params))
    return units


class FlatUnit:
    """One module's parameters, as views into one flat buffer padded to N_d shards.

    Args:
        module: the module that owns ``params``.
        params: its trainable parameters, all on one device; afterwards each
            ``p.data`` is a view of :attr:`data` (on that device) in ``dtype``.
        rank: this rank r in the group.
        world_size: N_d.
        dtype: dtype of the parameters and gradients that forward/backward use.
    """

    def __init__(
        self,
        module: nn.Module,
        params: list[nn.Parameter],
        rank: int,
        world_size: int,
        dtype: torch.dtype,
    ) -> None:
        self.module, self.params = module, params
        self.shapes = [p.shape for p in params]
        # region flatten
        self.numel = sum(p.numel() for p in params)  # Psi_u
        self.shard_numel = -(-self.numel // world_size)  # Psi_s = ceil(Psi_u / N_d)
        self.padded_numel = self.shard_numel * world_size  # N_d Psi_s
        self.shard = slice(rank * self.shard_numel, (rank + 1) * self.shard_numel)
        # On the parameters' device: NCCL gets CUDA buffers, gloo CPU ones.
        self.data = params[0].new_zeros(self.padded_numel, dtype=dtype)  # (N_d Psi_s,)
        for p, view in zip(params, self.views(self.data), strict=True):
            view.copy_(p.detach())
            p.data = view  # forward and backward now read the flat buffer
        # endregion
        self.grad: torch.Tensor | None = (
            None  # (N_d Psi_s,) or (Psi_s,), set by the stage
        )

    def views(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Cut a (N_d Psi_s,) buffer into one view per parameter, shaped like it."""
        out, offset = [], 0
        for shape in self.shapes:
            n = shape.numel()
            out.append(flat[offset : offset + n].view(shape))
            offset += n
        return out
