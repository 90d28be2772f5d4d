"""ZeRO stage 2 (P_os+g): each rank also keeps only its shard of the gradients.

After stage 1 a rank still holds the full gradient, 2 Psi bytes, although its update
reads only its shard. Stage 2 (Rajbhandari et al. 2020, Sec. 5.2) reduce-scatters
each unit's gradient as soon as backward has produced it and frees the full one, so a
rank keeps (2 Psi) / N_d bytes of gradient shards, and at most one unit's full gradient
(DeepSpeed reduces in buckets of a few hundred MB for the same reason). A hook on each
parameter counts the gradients of its unit; the last one triggers the reduce-scatter.
Nothing else changes: the update and the all-gather of parameters are stage 1's, and
communication stays 2 Psi per step. Notation as in :mod:`aiinfra.parallel.zero.stage1`.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from aiinfra.parallel.zero.flat import FlatUnit
from aiinfra.parallel.zero.stage1 import Zero1


class Zero2(Zero1):
    """ZeRO stage 2: stage 1 plus gradients reduce-scattered during backward.

    Usage and arguments as :class:`Zero1`; only gradient handling differs.
    Gradients accumulate over several backward passes before a :meth:`step`.
    """

    def _init_gradients(self) -> None:
        """Stage 2: each unit keeps an (Psi_s,) gradient shard; hooks fill it."""
        for u in self.units:
            u.grad = u.data.new_zeros(u.shard_numel)  # (Psi_s,)
            u.pending = len(u.params)  # gradients still to come in this backward
            for p in u.params:
                p.grad = None
                p.register_post_accumulate_grad_hook(
                    functools.partial(self._on_grad_ready, u)
                )

    def _on_grad_ready(self, unit: FlatUnit, p: nn.Parameter) -> None:
        """Hook: ``p.grad`` is final; once the unit's last one is, reduce them."""
        unit.pending -= 1
        if unit.pending == 0:
            unit.pending = len(unit.params)
            self._reduce_unit(unit)

    @staticmethod
    def _pack_gradients(unit: FlatUnit) -> torch.Tensor:
        """Copy the gradients into one (N_d Psi_s,) buffer, drop the originals."""
        full = unit.grad.new_zeros(unit.padded_numel)  # (N_d Psi_s,), transient
        for view, p in zip(unit.views(full), unit.params, strict=True):
            view.copy_(p.grad)
            p.grad = None  # the full gradient is gone: 2 Psi -> 2 Psi / N_d bytes
        return full

    def _reduce_unit(self, unit: FlatUnit) -> None:
        """Reduce-scatter one unit's gradients into its shard; free the full ones."""
        full = self._pack_gradients(unit)  # (N_d Psi_s,)
        shard = torch.empty_like(unit.grad)  # (Psi_s,)
        self.comm.reduce_scatter(shard, full)  # (N_d Psi_s,) summed -> my (Psi_s,)
        unit.grad += shard  # += : gradient accumulation over micro-batches

    def reduce_gradients(self) -> None:
        """The shards are already reduced: copy them, as fp32, into master.grad.

        Raises:
            RuntimeError: a unit got only some of its gradients (an unused parameter).
        """
        partial = [u for u in self.units if u.pending != len(u.params)]
        if partial:
            raise RuntimeError(
                f"{type(partial[0].module).__name__}: some of its parameters got no "
                "gradient in backward, so its shard was never reduced"
            )
        self.master.grad = torch.empty_like(self.master)  # fp32, lives during step
        for u, g in zip(self.units, self._master_shards(self.master.grad), strict=True):
            g.copy_(u.grad)
        self.master.grad.div_(self.comm.world_size)
