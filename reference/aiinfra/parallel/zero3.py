"""ZeRO stage 3 (P_os+g+p): each rank also keeps only its shard of the parameters.

Stage 3 (Rajbhandari et al. 2020, Sec. 5.3) partitions the last replicated state, the
16-bit parameters, so all 16 Psi bytes of model states divide by N. A unit's full
parameters exist only while it computes: a forward pre-hook all-gathers them into the
unit's flat buffer and a forward hook frees the buffer again; a hook on the unit's
output gathers them once more when backward reaches the unit, and the stage 2
reduce-scatter frees them after. Freeing shrinks the buffer's storage to zero bytes
instead of dropping it, so the parameters (views into it) and the tensors autograd
saved during forward stay valid and see the data again after the next gather (the
FSDP trick, Zhao et al. 2023). Each step all-gathers the parameters twice and
reduce-scatters the gradients once: 3 Psi elements per rank, 1.5x DDP. The optimizer
writes its updated shard in place; no all-gather follows the step. Notation as in
:mod:`aiinfra.parallel.zero1`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.memory.model_states import ModelStateBytes
from aiinfra.parallel.zero1 import FlatUnit
from aiinfra.parallel.zero2 import Zero2


class Zero3(Zero2):
    """ZeRO stage 3: stage 2 plus parameters gathered around each unit's use.

    Usage and arguments as :class:`Zero1`. Each unit (a module with parameters of
    its own) must run once per forward pass.
    """

    def __init__(
        self,
        module: nn.Module,
        group: dist.ProcessGroup | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(module, group, **kwargs)
        for u in self.units:
            u.shard_data = u.data[u.shard].clone()  # (S,): all this rank keeps
            self._free(u)
            u.module.register_forward_pre_hook(lambda m, args, u=u: self._gather(u))
            u.module.register_forward_hook(
                lambda m, args, out, u=u: self._after_forward(u, out)
            )

    def _gather(self, unit: FlatUnit) -> None:
        """Re-allocate the unit's flat buffer and all-gather every rank's shard."""
        storage = unit.data.untyped_storage()
        if storage.nbytes() > 0:  # already gathered (a unit with several outputs)
            return
        storage.resize_(unit.padded_numel * unit.data.element_size())
        self.comm.all_gather(unit.data, unit.shard_data)  # (S,) -> (N S,)

    def _after_forward(self, unit: FlatUnit, output: Any) -> None:
        """Free the parameters; gather them again when backward reaches the unit.

        A hook on each output tensor runs when the gradient with respect to it is
        ready, just before autograd computes the unit's own gradients.
        """
        self._free(unit)
        outputs = output if isinstance(output, tuple | list) else [output]
        for t in outputs:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda grad, u=unit: self._gather(u))

    @staticmethod
    def _free(unit: FlatUnit) -> None:
        """Shrink the unit's flat buffer to 0 bytes; views of it stay valid."""
        unit.data.untyped_storage().resize_(0)

    def _reduce_unit(self, unit: FlatUnit) -> None:
        """Stage 2's reduce-scatter, then free the parameters backward needed."""
        super()._reduce_unit(unit)
        self._free(unit)

    def publish_parameters(self) -> None:
        """Keep the updated shard; the next forward gathers it (no all-gather)."""
        for u, m in zip(
            self.units, self._master_shards(self.master.detach()), strict=True
        ):
            u.shard_data.copy_(m)

    def full_parameters(self) -> list[torch.Tensor]:
        """All-gather every unit, copy its parameters, free it again (a collective)."""
        out = []
        for u in self.units:
            self._gather(u)
            out += [v.clone() for v in u.views(u.data)]
            self._free(u)
        return out

    def model_state_bytes(self) -> ModelStateBytes:
        """As :meth:`Zero1.model_state_bytes`, the parameter shards included."""
        states = super().model_state_bytes()
        shards = sum(u.shard_data.untyped_storage().nbytes() for u in self.units)
        return ModelStateBytes(states.params + shards, states.grads, states.optimizer)
