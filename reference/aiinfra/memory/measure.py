"""Measuring training memory from the tensors themselves, without a GPU.

Model states are easy to weigh: after one optimizer step, every parameter, gradient
and optimizer-state tensor exists, and ``numel() * element_size()`` is exact.
Activations are what autograd saves for backward, and PyTorch lets us watch that:
inside ``torch.autograd.graph.saved_tensors_hooks(pack, unpack)``, every tensor an
operation saves passes through ``pack``. Two saved tensors often share memory (a view
of Q and the fused QKV output, a linear's input that is also a LayerNorm's output),
and memory is freed per storage, so :class:`SavedTensorLog` counts each storage once,
whole, and skips the storages of parameters and buffers, which are model states.
It also follows the saved bytes that are still alive, so its ``peak_bytes`` sees the
recomputation of a checkpointed segment during backward.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from aiinfra.memory.model_states import ModelStateBytes


@dataclass(frozen=True)
class SavedTensor:
    """One tensor that autograd saved: its shape, dtype and storage bytes."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    storage_bytes: int
    new_storage: bool  # False when a storage already counted is saved again


class _Handle:
    """What autograd keeps instead of the tensor; its death frees the bytes.

    It holds the tensor detached: an op that saves its own output (``amax``,
    ``softmax``) would otherwise hold, through the output's ``grad_fn``, the node
    that holds this handle, a cycle that outlives the graph.
    """

    def __init__(self, log: SavedTensorLog, key: int, tensor: torch.Tensor) -> None:
        self.log, self.key, self.tensor = log, key, tensor

    def __del__(self) -> None:
        if self.key:
            self.log._release(self.key)


class SavedTensorLog(torch.autograd.graph.saved_tensors_hooks):
    """Log the tensors saved for backward inside ``with SavedTensorLog(...):``.

    Args:
        exclude: tensors whose storage is not an activation (``model.parameters()``
            and ``model.buffers()``); saved views of them are skipped.

    Attributes:
        entries: every saved tensor that is not excluded, in order.
        total_bytes: bytes of the distinct storages saved so far.
        live_bytes: bytes of saved storages that autograd still holds.
        peak_bytes: the largest ``live_bytes`` seen.
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self.excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self.entries: list[SavedTensor] = []
        self.total_bytes = self.live_bytes = self.peak_bytes = 0
        self._refs: dict[int, int] = {}  # storage -> handles alive
        self._nbytes: dict[int, int] = {}  # storage -> its bytes
        self._seen: set[int] = set()
        super().__init__(self._pack, self._unpack)

    def __enter__(self) -> SavedTensorLog:
        super().__enter__()
        return self

    def _pack(self, tensor: torch.Tensor) -> Any:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self.excluded or key == 0:  # a model state, or an empty tensor
            return _Handle(self, 0, tensor)
        new = key not in self._seen
        self.entries.append(
            SavedTensor(tuple(tensor.shape), tensor.dtype, storage.nbytes(), new)
        )
        if new:
            self._seen.add(key)
            self.total_bytes += storage.nbytes()
        if self._refs.get(key, 0) == 0:  # first live handle on this storage
            self._nbytes[key] = storage.nbytes()
            self.live_bytes += storage.nbytes()
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        self._refs[key] = self._refs.get(key, 0) + 1
        return _Handle(self, key, tensor.detach())  # no cycle through grad_fn

    @staticmethod
    def _unpack(handle: _Handle) -> torch.Tensor:
        return handle.tensor

    def _release(self, key: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:  # autograd dropped the last reference
            self.live_bytes -= self._nbytes.pop(key)


def model_state_bytes(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> ModelStateBytes:
    """Weigh parameters, gradients and optimizer states, tensor by tensor.

    Call it after ``optimizer.step()`` so that the lazily created states exist. The
    optimizer part counts every tensor in ``optimizer.state`` and every parameter
    in ``optimizer.param_groups`` that is not one of the model's own (the fp32
    master copies of mixed precision), each storage once.

    Args:
        model: the trained module.
        optimizer: its optimizer (or a wrapper exposing ``state`` and
            ``param_groups``, such as :class:`aiinfra.precision.MasterWeights`).

    Returns:
        Measured bytes by part.
    """
    params = {p.untyped_storage().data_ptr(): p for p in model.parameters()}
    grads = [p.grad for p in params.values() if p.grad is not None]
    opt: dict[int, torch.Tensor] = {}
    candidates = [t for g in optimizer.param_groups for t in g["params"]]
    candidates += [t for s in optimizer.state.values() for t in s.values()]
    for t in candidates:
        if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in params:
            opt[t.untyped_storage().data_ptr()] = t

    def nbytes(ts: Iterable[torch.Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in ts)

    return ModelStateBytes(
        params=nbytes(params.values()),
        grads=nbytes(grads),
        optimizer=nbytes(opt.values()),
    )
