"""Memory of attention, measured: ``O(N^2)`` for the standard algorithm, ``O(N)`` tiled.

Standard attention keeps the ``N x N`` probabilities for the backward pass;
FlashAttention keeps ``O`` and one log-sum-exp per row and recomputes the rest
(Dao et al. 2022, Sec. 3.1 and Thm. 2: extra memory ``O(N)``). On the CPU PyTorch
has no allocator statistics such as ``torch.cuda.max_memory_allocated``, so
:class:`PeakMemory` tracks tensors itself: a ``TorchDispatchMode`` sees every tensor
an operator returns, adds the bytes of each new storage to a running total, and a
weak-reference callback subtracts them when the storage is freed. The peak of that
total is exact for tensors created inside the measured call (its inputs excluded);
it does not see allocator slack or scratch space an operator frees before it
returns. :func:`saved_bytes` gives a second, simpler measure: the bytes autograd
keeps for backward, seen through ``torch.autograd.graph.saved_tensors_hooks``.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from aiinfra.models.flash.attention import flash_attention, standard_attention
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); measuring does not
    from matplotlib.figure import Figure


class PeakMemory(TorchDispatchMode):
    """Live and peak bytes of the tensor storages created while the mode is active.

    Use as ``with PeakMemory() as mem: ...``; then read ``mem.peak``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = 0  # bytes of storages created here and not yet freed
        self.peak = 0
        self._storages: dict[int, weakref.ref] = {}  # data_ptr -> storage

    def __torch_dispatch__(  # type: ignore[override]
        self,
        func: Any,
        types: Any,
        args: tuple = (),
        kwargs: dict | None = None,
    ) -> Any:
        """Run the operator, then start tracking the storages of its outputs."""
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, Tensor) and t.device.type != "meta":
                self._track(t.untyped_storage())
        return out

    def _track(self, storage: torch.UntypedStorage) -> None:
        key, nbytes = storage.data_ptr(), storage.nbytes()
        if nbytes == 0 or key in self._storages:  # a view, or an in-place result
            return
        self._storages[key] = weakref.ref(storage, lambda _: self._free(key, nbytes))
        self.live += nbytes
        self.peak = max(self.peak, self.live)

    def _free(self, key: int, nbytes: int) -> None:
        if self._storages.pop(key, None) is not None:
            self.live -= nbytes


def _attention_inputs(n: int, d: int, seed: int = 0) -> list[Tensor]:
    g = torch.Generator().manual_seed(seed)
    shape = (1, 1, n, d)  # (B, H, T, d)
    return [torch.randn(shape, generator=g).requires_grad_() for _ in range(3)]


def peak_bytes(fn: Callable[..., Tensor], n: int, d: int = 64) -> int:
    """Peak bytes created by one forward and backward pass of ``fn(q, k, v)``.

    Args:
        fn: attention, ``(B, H, T, d)`` in and out.
        n: sequence length ``T`` (``B = H = 1``, fp32).
        d: head dimension.

    Returns:
        The peak, in bytes, of the tensors created inside the call (outputs,
        intermediates, saved tensors and gradients; not the inputs).
    """
    q, k, v = _attention_inputs(n, d)
    do = torch.ones(1, 1, n, d)
    with PeakMemory() as mem:
        fn(q, k, v).backward(do)
    return mem.peak


def peak_and_saved_bytes(
    fn: Callable[..., Tensor], n: int, d: int = 64
) -> tuple[int, int]:
    """:func:`peak_bytes` and :func:`saved_bytes` of one forward and backward pass.

    One pass instead of two (a forward for the saved bytes, a forward and a backward
    for the peak): the hooks only note what autograd saves and hand the same tensor
    back, so the peak is the one :func:`peak_bytes` measures.

    Args:
        fn: attention, ``(B, H, T, d)`` in and out.
        n: sequence length ``T`` (``B = H = 1``, fp32).
        d: head dimension.

    Returns:
        ``(peak, saved)`` in bytes.
    """
    q, k, v = _attention_inputs(n, d)
    do = torch.ones(1, 1, n, d)
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with PeakMemory() as mem:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(q, k, v)
        out.backward(do)
        del out
    return mem.peak, sum(seen.values())


def saved_bytes(fn: Callable[..., Tensor], n: int, d: int = 64) -> int:
    """Bytes of the distinct storages autograd saves for the backward of ``fn``.

    Args:
        fn: the attention function, as in :func:`peak_bytes`.
        n: sequence length.
        d: head width.

    Returns:
        Bytes saved for backward, inputs included when they are saved.
    """
    q, k, v = _attention_inputs(n, d)
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(q, k, v)
    return sum(seen.values())


def tiled(block: int) -> Callable[..., Tensor]:
    """:func:`flash_attention` with square blocks of ``block`` positions."""
    return lambda q, k, v: flash_attention(q, k, v, block_q=block, block_k=block)


@functools.lru_cache(maxsize=4)  # the figure and the table share one measurement
def memory_curve(
    ns: tuple[int, ...] = (256, 512, 1024, 2048), d: int = 64, block: int = 128
) -> dict[str, list[int]]:
    """Peak and saved bytes of standard and tiled attention over sequence lengths.

    Args:
        ns: sequence lengths ``T`` (a tuple: results are cached per argument).
        d: head dimension.
        block: ``B_r = B_c`` of the tiled algorithm.

    Returns:
        A dict with the keys ``N``, ``standard_peak``, ``tiled_peak``,
        ``standard_saved`` and ``tiled_saved``, each a list with one entry per length.
    """
    curve: dict[str, list[Any]] = {"N": list(ns)}
    for name, fn in (("standard", standard_attention), ("tiled", tiled(block))):
        peak, saved = zip(*(peak_and_saved_bytes(fn, n, d) for n in ns), strict=True)
        curve[f"{name}_peak"], curve[f"{name}_saved"] = list(peak), list(saved)
    return curve


def growth_exponent(ns: Sequence[int], values: Sequence[float]) -> float:
    """Exponent ``p`` of ``value ~ c + a N^p``, fitted on the increments.

    The increments ``value(N_{i+1}) - value(N_i)`` cancel the fixed cost ``c`` (for
    the tiled algorithm, the scratch space of one block) and grow like ``N_i^p``
    when the lengths are geometric; ``p`` is their least-squares slope in log-log.

    Args:
        ns: at least three increasing lengths, best a geometric series.
        values: the measured bytes at each length, increasing.

    Returns:
        ``p``: 2 for memory quadratic in ``N``, 1 for linear.

    Raises:
        ValueError: fewer than three points, or lengths or values not increasing.
    """
    if len(ns) < 3 or len(values) != len(ns):
        raise ValueError(f"need >= 3 (N, value) pairs, got {len(ns)}, {len(values)}")
    steps = [
        (n1, v1 - v0)
        for (n0, n1), (v0, v1) in zip(pairwise(ns), pairwise(values), strict=True)
    ]
    if any(n1 <= n0 for n0, n1 in pairwise(ns)) or any(dv <= 0 for _, dv in steps):
        raise ValueError("ns and values must both be strictly increasing")
    x = [math.log(n) for n, _ in steps]
    y = [math.log(dv) for _, dv in steps]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    return sxy / sum((a - mx) ** 2 for a in x)


def memory_figure(curve: dict[str, list[int]] | None = None) -> Figure:
    """Log-log plot of measured peak bytes against ``T``, standard against tiled."""
    from matplotlib.figure import Figure

    curve = curve or memory_curve()
    ns = curve["N"]
    fig = Figure(figsize=(6, 3.6))
    ax = fig.add_subplot()
    for name, label, marker in (
        ("standard", "standard (Alg. 0)", "o"),
        ("tiled", "tiled (FlashAttention-2)", "s"),
    ):
        mib = [b / 2**20 for b in curve[f"{name}_peak"]]
        slope = growth_exponent(ns, curve[f"{name}_peak"])
        ax.loglog(
            ns, mib, marker=marker, label=f"{label}: $\\propto T^{{{slope:.2f}}}$"
        )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("peak MiB (forward + backward)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def memory_table(curve: dict[str, list[int]] | None = None) -> Table:
    """The measured bytes behind :func:`memory_figure`, in KiB."""
    curve = curve or memory_curve()
    rows = [
        [n]
        + [
            round(curve[key][i] / 1024)
            for key in ("standard_peak", "tiled_peak", "standard_saved", "tiled_saved")
        ]
        for i, n in enumerate(curve["N"])
    ]
    note = (
        "KiB (1024 bytes), fp32, one head of d = 64, blocks of 128; peak = "
        "tensors created by forward + backward (PeakMemory), saved = stored for "
        "backward (saved_tensors_hooks)."
    )
    return Table(
        ["T", "standard peak", "tiled peak", "standard saved", "tiled saved"],
        rows,
        note,
    )
