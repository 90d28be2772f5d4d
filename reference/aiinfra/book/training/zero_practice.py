"""What ``docs/training/zero_practice.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra.parallel.zero import timeline as zero3_timeline
from aiinfra.parallel.zero.optim import CLIP_EPS

ZERO_CLIP_EPS = CLIP_EPS  # what torch adds to the norm before dividing
# The ZeRO-3 timeline: Llama 3 8B's layers, 16384 tokens per GPU per step (two
# 8192-token sequences), a ring of 64 ranks whose slowest hop is one 400G NIC.
ZERO3_MODEL, ZERO3_TOKENS, ZERO3_RANKS, ZERO3_LINK = "llama-3-8b", 16384, 64, "nic400"
_ZERO3_VARIANT_KEYS = {  # the page's short names for the timeline's variants
    "sync": "synchronous",
    "prefetch": "prefetch one unit ahead",
    "keep": "prefetch, no reshard after forward",
}


@functools.cache
def _zero3_costs() -> zero3_timeline.UnitCosts:
    return zero3_timeline.layer_costs(
        ZERO3_MODEL, ZERO3_TOKENS, ZERO3_RANKS, ZERO3_LINK
    )


@functools.cache
def _zero3_timelines() -> dict[str, zero3_timeline.Zero3Timeline]:
    return zero3_timeline.variant_timelines(_zero3_costs())


def zero3_layer_millions() -> float:
    """Parameters of one Llama 3 8B layer, millions (Psi_u)."""
    return zero3_timeline.layer_parameters(ZERO3_MODEL) / 1e6


def zero3_unit_ms(kind: str) -> float:
    """One layer's time on the cost model, ms.

    Args:
        kind: ``"forward"``, ``"backward"``, ``"gather"`` or ``"reduce"``.

    Raises:
        ValueError: an unknown ``kind``.
    """
    kinds = ("forward", "backward", "gather", "reduce")
    if kind not in kinds:
        raise ValueError(f"kind must be one of {kinds}, got {kind!r}")
    return getattr(_zero3_costs(), kind)[0] * 1e3


def _timeline(variant: str) -> zero3_timeline.Zero3Timeline:
    if variant not in _ZERO3_VARIANT_KEYS:
        raise ValueError(
            f"variant must be one of {sorted(_ZERO3_VARIANT_KEYS)}, got {variant!r}"
        )
    return _zero3_timelines()[_ZERO3_VARIANT_KEYS[variant]]


def zero3_compute_ms() -> float:
    """Forward and backward compute of all layers, ms: the step with nothing exposed."""
    return _timeline("sync").compute_time * 1e3


def zero3_step_ms(variant: str) -> float:
    """Simulated step time of a variant (``sync``, ``prefetch``, ``keep``), ms."""
    return _timeline(variant).step * 1e3


def zero3_exposed_ms(variant: str) -> float:
    """Communication the compute waited for in a variant, ms."""
    return _timeline(variant).exposed * 1e3


def zero3_overlap_tokens() -> float:
    """Tokens per GPU per micro-batch above which ZeRO-3's gathers can hide, T*."""
    return zero3_timeline.forward_overlap_tokens(ZERO3_RANKS, ZERO3_LINK)


def zero3_timeline_figure() -> Figure:
    """Llama 3 8B's ZeRO-3 step on the cost model: three variants."""
    return zero3_timeline.timeline_figure(_zero3_costs())
