"""ZeRO stage 1 (P_os): each rank keeps the optimizer states of 1/N_d of the parameters.

Mixed-precision Adam keeps 2 + 2 + K_opt = 16 bytes per parameter on every data-parallel
rank: a 16-bit parameter and gradient, and K_opt = 12 bytes of fp32 master parameter,
momentum and variance. The update of parameter i needs only the states of i, so ZeRO
(Rajbhandari et al. 2020, Sec. 5.1) cuts the flat parameter vector into N_d shards: rank
r keeps the fp32 states of shard r only (K_opt Psi / N_d bytes), reduce-scatters the
gradient to receive the sum over ranks for its shard, updates it, and all-gathers the
updated parameters. A reduce-scatter plus an all-gather is what an all-reduce does
anyway, so the step still moves 2 Psi elements per rank, like DDP. Each module's own
parameters form one *unit*, flattened into a buffer padded to N_d Psi_s elements so that
any Psi_u works (the layout FSDP uses, Zhao et al. 2023; stages 2 and 3 need units).
Notation: Psi parameters (Psi_u in unit u), N_d ranks, Psi_s = ceil(Psi_u / N_d) per
shard, K_opt optimizer bytes per parameter (the paper's K).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.memory.model_states import ModelStateBytes
from aiinfra.parallel.data.naive import broadcast_parameters, check_replicas
from aiinfra.parallel.zero.flat import FlatUnit, module_units
from aiinfra.parallel.zero.optim import (
    check_clip_and_decay,
    clip_grad_norm_shards_,
    decay_mask,
)


def storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors``: what the rank really holds."""
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in tensors}
    return sum(s.nbytes() for s in storages.values())


class Zero1:
    """ZeRO stage 1: AdamW whose fp32 states cover only this rank's shards.

    Usage: ``loss.backward(); zero.step(); zero.zero_grad()``.

    Weight decay is AdamW's, decoupled, applied by this class to the elements that
    :func:`~aiinfra.parallel.zero.optim.decay_mask` selects (the inner
    ``torch.optim.AdamW`` runs with ``weight_decay=0``).

    Args:
        module: the replica: its parameters are overwritten by rank 0's and moved
            into flat buffers of ``param_dtype`` on their device (a GPU under NCCL,
            the CPU under gloo), where the master copy and AdamW's states live too.
        group: the data-parallel process group (``None``: the world).
        param_dtype: dtype of parameters and gradients (``torch.bfloat16`` for the
            paper's mixed precision; ``torch.float32`` to compare with plain AdamW).
        lr, betas, eps, weight_decay: as in ``torch.optim.AdamW``.
        max_grad_norm: clip the global gradient norm to this (``None``: no
            clipping), as ``torch.nn.utils.clip_grad_norm_`` on the whole model.
        no_decay_ndim: parameters with fewer dimensions get no weight decay (2:
            biases and norm gains, the usual recipe; 0: decay all, as one AdamW
            parameter group).

    Raises:
        ValueError: ``param_dtype`` is not a floating-point dtype, an AdamW argument,
            ``max_grad_norm`` or ``no_decay_ndim`` is out of range, or see
            :func:`check_replicas` and
            :func:`~aiinfra.parallel.zero.flat.module_units`.
    """

    def __init__(
        self,
        module: nn.Module,
        group: dist.ProcessGroup | None = None,
        *,
        param_dtype: torch.dtype = torch.float32,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        max_grad_norm: float | None = None,
        no_decay_ndim: int = 0,
    ) -> None:
        if not (isinstance(param_dtype, torch.dtype) and param_dtype.is_floating_point):
            raise ValueError(f"param_dtype must be a float dtype, got {param_dtype!r}")
        for name, value in [("lr", lr), ("eps", eps), ("weight_decay", weight_decay)]:
            if not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not (len(betas) == 2 and all(0 <= b < 1 for b in betas)):
            raise ValueError(f"betas must be two numbers in [0, 1), got {betas!r}")
        check_clip_and_decay(max_grad_norm, no_decay_ndim)
        units = module_units(module)  # every check above runs before any collective
        self.module = module
        self.comm = check_replicas(module, group)
        broadcast_parameters(module, self.comm)
        self.comm.reset()
        n_ranks, rank = self.comm.world_size, self.comm.rank
        self.units = [FlatUnit(m, ps, rank, n_ranks, param_dtype) for m, ps in units]
        # The fp32 master copy of this rank's shards, one after the other: the only
        # tensor AdamW sees, so its momentum and variance are sharded too.
        shards = [u.data[u.shard].float() for u in self.units]
        self.master = nn.Parameter(torch.cat(shards))  # (sum_u Psi_s,)
        self.optimizer = torch.optim.AdamW(
            [self.master], lr=lr, betas=betas, eps=eps, weight_decay=0.0
        )
        self.weight_decay, self.max_grad_norm = weight_decay, max_grad_norm
        self.decay = decay_mask(self.units, no_decay_ndim, self.master.device)
        self._init_gradients()

    def _init_gradients(self) -> None:
        """Stage 1: a full gradient buffer per unit; autograd accumulates into it."""
        for u in self.units:
            u.grad = torch.zeros_like(u.data)  # (N_d Psi_s,)
            for p, g in zip(u.params, u.views(u.grad), strict=True):
                p.grad = g

    def _master_shards(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """Cut a (sum_u Psi_s,) tensor into each unit's (Psi_s,) shard."""
        return list(flat.split([u.shard_numel for u in self.units]))

    def reduce_gradients(self) -> None:
        """Put the mean over ranks of this rank's gradient shards in master.grad."""
        self.master.grad = torch.empty_like(self.master)  # fp32, lives during step
        for u, g in zip(self.units, self._master_shards(self.master.grad), strict=True):
            shard = u.grad.new_empty(u.shard_numel)  # (Psi_s,)
            self.comm.reduce_scatter(
                shard, u.grad
            )  # (N_d Psi_s,) summed -> my (Psi_s,)
            g.copy_(shard)
        self.master.grad.div_(self.comm.world_size)

    def publish_parameters(self) -> None:
        """Stage 1: all-gather every unit's updated shards into its flat buffer."""
        for u, m in zip(
            self.units, self._master_shards(self.master.detach()), strict=True
        ):
            self.comm.all_gather(u.data, m.to(u.data.dtype))  # (Psi_s,) -> (N_d Psi_s,)

    def decay_weights(self) -> None:
        """AdamW's decoupled decay, x <- (1 - lr lambda) x, on the decayed elements."""
        lr = self.optimizer.param_groups[0]["lr"]
        factor = torch.where(
            self.decay, 1 - lr * self.weight_decay, 1.0
        )  # (sum_u Psi_s,)
        self.master.detach().mul_(factor)

    @torch.no_grad()
    def step(self) -> torch.Tensor | None:
        """Reduce-scatter gradients, update this rank's shard, share the result.

        Returns:
            The global gradient norm before clipping, if ``max_grad_norm`` is set.
        """
        self.reduce_gradients()
        norm = None
        if self.max_grad_norm is not None:  # one scalar all-reduce
            norm = clip_grad_norm_shards_(
                self.master.grad, self.max_grad_norm, self.comm
            )
        self.decay_weights()
        self.optimizer.step()
        self.master.grad = (
            None  # K_opt = 12 bytes/param: no fp32 gradient between steps
        )
        self.publish_parameters()
        return norm

    def zero_grad(self) -> None:
        """Zero the gradient buffers in place (they stay the parameters' ``.grad``)."""
        for u in self.units:
            u.grad.zero_()

    def full_parameters(self) -> list[torch.Tensor]:
        """A copy of every trainable parameter, full size, in ``module_units`` order."""
        return [v.clone() for u in self.units for v in u.views(u.data)]

    def model_state_bytes(self) -> ModelStateBytes:
        """Bytes this rank holds now, counted from the storages of real tensors."""
        states = [t for s in self.optimizer.state.values() for t in s.values()]
        moments = [t for t in states if t.numel() == self.master.numel()]
        return ModelStateBytes(
            params=storage_bytes([u.data for u in self.units]),
            grads=storage_bytes([u.grad for u in self.units]),
            optimizer=storage_bytes([self.master, *moments]),  # K_opt = 4 + 4 + 4
        )
