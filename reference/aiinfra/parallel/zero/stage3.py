"""ZeRO stage 3 (P_os+g+p): each rank also keeps only its shard of the parameters.

Stage 3 (Rajbhandari et al. 2020, Sec. 5.3) partitions the last replicated state, the
16-bit parameters, so all 16 Psi bytes of model states divide by N_d. A unit's full
parameters exist only while it computes: a forward pre-hook all-gathers them into the
unit's flat buffer and a forward hook frees the buffer again; a hook on the unit's
output gathers them once more when backward reaches the unit, and the stage 2
reduce-scatter frees them after. Freeing shrinks the buffer's storage to zero bytes
instead of dropping it, so the parameters (views into it) and the tensors autograd
saved during forward stay valid and see the data again after the next gather (the
FSDP trick, Zhao et al. 2023). Each step all-gathers the parameters twice and
reduce-scatters the gradients once: 3 Psi elements per rank, 1.5x DDP. The optimizer
writes its updated shard in place; no all-gather follows the step.

With ``prefetch`` > 0 the all-gathers overlap compute as FSDP's do: gathering unit i
also starts the asynchronous all-gather of the next units (registration order in
forward, its reverse in backward), at most ``prefetch`` in flight, and each is
waited for just before its unit runs; the reduce-scatter is asynchronous too, one in
flight. ``reshard_after_forward=False`` keeps the parameters gathered from forward
to backward: one all-gather fewer, 2 Psi per step, for a full unit's memory each.
Notation as in :mod:`aiinfra.parallel.zero.stage1`.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from aiinfra import checks
from aiinfra.memory.model_states import ModelStateBytes
from aiinfra.parallel.zero.flat import FlatUnit
from aiinfra.parallel.zero.stage2 import Zero2


class Zero3(Zero2):
    """ZeRO stage 3: stage 2 plus parameters gathered around each unit's use.

    Usage and arguments as :class:`Zero1`, plus two. Each unit (a module with
    parameters of its own) must run once per forward pass; prefetching assumes it
    runs in registration order (another order is still correct, only slower).

    Args:
        prefetch: all-gathers started ahead and in flight at once (0: none, each
            unit gathered when it runs).
        reshard_after_forward: free a unit's parameters after its forward (``False``:
            keep them for backward; no second all-gather).

    Raises:
        ValueError: ``prefetch`` is not an int >= 0, ``reshard_after_forward`` not a
            bool, or as :class:`Zero1`.
    """

    def __init__(
        self,
        module: nn.Module,
        group: dist.ProcessGroup | None = None,
        *,
        prefetch: int = 0,
        reshard_after_forward: bool = True,
        **kwargs: Any,
    ) -> None:
        checks.non_negative_int("prefetch", prefetch)
        if not isinstance(reshard_after_forward, bool):
            raise ValueError(
                f"reshard_after_forward must be a bool, got {reshard_after_forward!r}"
            )
        self.prefetch, self.reshard_after_forward = prefetch, reshard_after_forward
        self.in_flight: dict[int, dist.Work] = {}  # unit index -> its all-gather
        self.peak_in_flight = 0  # the most all-gathers in flight at once
        self._reducing: tuple | None = None  # (work, unit, shard, full) in flight
        super().__init__(module, group, **kwargs)
        for i, u in enumerate(self.units):
            u.index = i
            u.shard_data = u.data[u.shard].clone()  # (Psi_s,): all this rank keeps
            self._free(u)
            u.module.register_forward_pre_hook(lambda m, a, u=u: self._gather(u, 1))
            u.module.register_forward_hook(
                lambda m, args, out, u=u: self._after_forward(u, out)
            )

    def _start_gather(self, unit: FlatUnit, async_op: bool) -> dist.Work | None:
        """Re-allocate the unit's flat buffer and all-gather every rank's shard."""
        storage = unit.data.untyped_storage()
        storage.resize_(unit.padded_numel * unit.data.element_size())
        # (Psi_s,) from every rank -> (N_d Psi_s,)
        return self.comm.all_gather(unit.data, unit.shard_data, async_op)

    def _gather(self, unit: FlatUnit, direction: int = 0) -> None:
        """Make the unit's parameters present, then prefetch the units after it.

        Args:
            unit: the unit about to run.
            direction: 1 in forward, -1 in backward, 0: no prefetch.
        """
        work = self.in_flight.pop(unit.index, None)
        if work is not None:
            work.wait()  # prefetched: its all-gather was started earlier
        elif unit.data.untyped_storage().nbytes() == 0:  # not gathered yet
            self._start_gather(unit, async_op=False)
        if self.prefetch and direction:
            self._prefetch(unit.index, direction)

    def _prefetch(self, index: int, direction: int) -> None:
        """Start the all-gathers of the next ``prefetch`` units, a bounded number."""
        # region prefetch
        ahead = [index + direction * step for step in range(1, self.prefetch + 1)]
        for j in ahead:  # the next units in this pass's order
            if not 0 <= j < len(self.units) or len(self.in_flight) >= self.prefetch:
                break
            unit = self.units[j]
            if j in self.in_flight or unit.data.untyped_storage().nbytes() > 0:
                continue  # already on its way, or still gathered
            self.in_flight[j] = self._start_gather(unit, async_op=True)
        # endregion
        self.peak_in_flight = max(self.peak_in_flight, len(self.in_flight))

    def _after_forward(self, unit: FlatUnit, output: Any) -> None:
        """Free the parameters; gather them again when backward reaches the unit.

        A hook on each output tensor runs when the gradient with respect to it is
        ready, just before autograd computes the unit's own gradients.
        """
        if self.reshard_after_forward:
            self._free(unit)
        outputs = output if isinstance(output, tuple | list) else [output]
        for t in outputs:
            if isinstance(t, torch.Tensor) and t.requires_grad:
                t.register_hook(lambda grad, u=unit: self._gather(u, -1))

    @staticmethod
    def _free(unit: FlatUnit) -> None:
        """Shrink the unit's flat buffer to 0 bytes; views of it stay valid."""
        unit.data.untyped_storage().resize_(0)

    def _reduce_unit(self, unit: FlatUnit) -> None:
        """Stage 2's reduce-scatter (asynchronous when prefetching), then free."""
        if not self.prefetch:
            super()._reduce_unit(unit)
            self._free(unit)
            return
        full = self._pack_gradients(unit)  # (N_d Psi_s,)
        self._free(unit)
        self._finish_reduce()  # one reduce-scatter in flight at most
        shard = torch.empty_like(unit.grad)  # (Psi_s,)
        work = self.comm.reduce_scatter(shard, full, async_op=True)
        self._reducing = (work, unit, shard, full)  # full lives until the wait

    def _finish_reduce(self) -> None:
        """Wait for the reduce-scatter in flight and accumulate its shard."""
        if self._reducing is not None:
            work, unit, shard, _ = self._reducing
            work.wait()
            unit.grad += shard
            self._reducing = None

    def reduce_gradients(self) -> None:
        """As :meth:`Zero2.reduce_gradients`, once the last reduce-scatter is done."""
        self._finish_reduce()
        super().reduce_gradients()

    def zero_grad(self) -> None:
        """As :meth:`Zero1.zero_grad`, after any reduce-scatter in flight."""
        self._finish_reduce()
        super().zero_grad()

    def publish_parameters(self) -> None:
        """Keep the updated shard; the next forward gathers it (no all-gather)."""
        for u, m in zip(
            self.units, self._master_shards(self.master.detach()), strict=True
        ):
            self._free(u)  # stale if kept gathered (forward without backward)
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
