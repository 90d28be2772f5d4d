"""The experts as one grouped computation: sort assignments by expert, run each once.

A token's ``K`` assignments scatter it over ``K`` experts. Looping over tokens runs a
tiny matrix-vector product per assignment; looping over experts with a mask (as
transformers' Mixtral block does) scans all ``T K`` assignments once per expert. The
grouped form sorts the ``T K`` (token, expert) pairs by expert once (a stable sort,
so each expert's tokens stay in batch order), gathers the tokens into one
``(T K, h)`` matrix in which expert ``i`` owns a contiguous slice of ``n_i`` rows, runs
each expert once on its slice, and scatter-adds the weighted rows back to their
tokens. On a GPU the per-expert products become one *grouped GEMM* kernel over the
slices (``torch._grouped_mm``, given the slice ends as ``offs``), which is how
MegaBlocks (Gale et al. 2023) and DeepSeek's kernels run the experts.
Notation: ``T`` tokens, ``h`` hidden width, ``E`` experts, ``K`` per token,
``n_i`` assignments of expert ``i``, ``d_e`` an expert's width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.routing import Routing
from aiinfra.models.moe.spec import MoESpec

GROUPED_MM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def sort_by_expert(routing: Routing) -> tuple[Tensor, Tensor, Tensor]:
    """The kept assignments in expert order.

    Args:
        routing: a batch's routing, ``(T, K)`` fields.

    Returns:
        ``(token, weight, counts)``: for each kept assignment in expert order its
        token index ``(A,)`` and gate weight ``(A,)``, and ``n_i`` per expert ``(E,)``.
    """
    T, K = routing.experts.shape
    E = routing.scores.shape[1]
    keep = routing.kept.reshape(-1)  # (T K,)
    expert = routing.experts.reshape(-1)[keep]  # (A,)
    token = torch.arange(T, device=expert.device).repeat_interleave(K)[keep]  # (A,)
    weight = routing.weights.reshape(-1)[keep]  # (A,)
    order = torch.argsort(expert, stable=True)  # (A,)
    counts = torch.bincount(expert, minlength=E)  # n_i, (E,)
    return token[order], weight[order], counts


def grouped_experts_output(layer: MoELayer, x: Tensor, routing: Routing) -> Tensor:
    """``sum_k kept_k g_k FFN_{e_k}(x)``, each expert run once on its sorted slice.

    Args:
        layer: the layer whose experts run.
        x: tokens ``(T, h)``.
        routing: their routing.

    Returns:
        The routed output ``(T, h)``.
    """
    # region grouped
    token, weight, counts = sort_by_expert(routing)
    xs = x[token]  # gathered, expert i's rows contiguous, (A, h)
    out = torch.empty_like(xs)  # (A, h)
    start = 0
    sizes = counts.tolist()  # n_i to the host: where the slices end
    for expert, n in zip(layer.experts, sizes, strict=True):
        if n:
            out[start : start + n] = expert(xs[start : start + n])  # (n_i, h)
        start += n
    y = torch.zeros_like(x)  # (T, h)
    y.index_add_(0, token, out * weight.to(x.dtype)[:, None])  # scatter back, weighted
    # endregion
    return y


def grouped_mm_experts_output(layer: MoELayer, x: Tensor, routing: Routing) -> Tensor:
    """The same with the three expert products as grouped GEMMs (``torch._grouped_mm``).

    The experts' weights are stacked into ``(E, h, d_e)`` and ``(E, d_e, h)`` tensors
    (transformers stores them so); ``offs`` holds the slice ends ``cumsum(n_i)``.

    Args:
        layer: the layer whose experts run.
        x: tokens ``(T, h)`` in fp32, bf16 or fp16 (what the kernel takes).
        routing: their routing.

    Returns:
        The routed output ``(T, h)``.

    Raises:
        TypeError: ``x`` has another dtype.
    """
    if x.dtype not in GROUPED_MM_DTYPES:
        raise TypeError(f"x must be one of {GROUPED_MM_DTYPES} here, got {x.dtype}")
    token, weight, counts = sort_by_expert(routing)
    xs = x[token]  # (A, h)
    offs = counts.cumsum(0).to(torch.int32)  # slice ends, (E,)
    w1 = torch.stack([e.w1.weight.t() for e in layer.experts])  # (E, h, d_e)
    w3 = torch.stack([e.w3.weight.t() for e in layer.experts])  # (E, h, d_e)
    w2 = torch.stack([e.w2.weight.t() for e in layer.experts])  # (E, d_e, h)
    gate = torch._grouped_mm(xs, w1, offs=offs)  # slice i times W_1 of i, (A, d_e)
    up = torch._grouped_mm(xs, w3, offs=offs)  # (A, d_e)
    out = torch._grouped_mm(F.silu(gate) * up, w2, offs=offs)  # (A, h)
    y = torch.zeros_like(x)  # (T, h)
    y.index_add_(0, token, out * weight.to(x.dtype)[:, None])
    return y


class GroupedMoELayer(MoELayer):
    """:class:`MoELayer` whose experts run grouped (sorted by expert).

    Same parameters, same routing, same output; only :meth:`experts_output` changes.

    Args:
        d_model: hidden width ``h``.
        spec: the layer's shape and routing switches.
        bias_update: as for :class:`MoELayer`.
        grouped_mm: take the ``torch._grouped_mm`` path.
    """

    def __init__(
        self,
        d_model: int,
        spec: MoESpec,
        *,
        bias_update: float = 0.0,
        grouped_mm: bool = False,
    ) -> None:
        super().__init__(d_model, spec, bias_update=bias_update)
        self.grouped_mm = grouped_mm

    def experts_output(self, x: Tensor, routing: Routing) -> Tensor:
        """The routed output ``(T, h)`` of tokens ``x`` ``(T, h)``, grouped."""
        if self.grouped_mm:
            return grouped_mm_experts_output(self, x, routing)
        return grouped_experts_output(self, x, routing)
