"""The time of one serving step: a roofline cost model of a batch's forward pass.

A serving GPU runs *steps*, one forward pass over the new tokens of every sequence in
the batch: whole prompts or chunks of them (prefill) and one token per generating
sequence (decode). A step's FLOPs are ``2 Psi_mm`` per new token for the matmuls
(``Psi_mm``: the weights that enter a matmul, :func:`~aiinfra.models.flops.
matmul_parameters`) plus ``4 L H d`` per pair of a query and a token it attends to; its
compulsory bytes are every weight once (the matmul weights, the norms and biases, and
one embedding row per new token: the table is indexed, not read), each sequence's cached
keys and values once, and the new keys and values written. On a GPU of peak ``F`` FLOP/s
and HBM bandwidth ``W`` the step takes at least ``max(FLOPs / F, bytes / W)`` (the
roofline of Williams et al. 2009): a decode step of a small batch is bound by the
weights' bytes, a prefill step by the FLOPs. The bound leaves out activations, the
sampler and kernel launches; ``overhead`` adds a fixed time per step. :func:`fused_step`
counts those FLOPs and bytes (of quantized weights too), :func:`decode_step_bytes` is
its bytes for a decode step, and :func:`roof_time` times a kernel: the one count and the
one roof of every page, which
:func:`~aiinfra.infer.kv.decode.decode_bound_tokens_per_s`,
:func:`~aiinfra.infer.quant.triton_matmul.decode_step_time` and
:mod:`~aiinfra.infer.phase_bench` use as well. :class:`LinearStepCost` is a toy cost for
schedules worked by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from aiinfra.accelerators import Gpu
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import attention_flops_per_token, matmul_parameters
from aiinfra.models.params import count_parameters
from aiinfra.models.roofline import Kernel

# (a prompt's new tokens in this step, its tokens cached before)
Chunk = tuple[int, int]
Count = int | float | np.ndarray  # one step, or an array for a run of steps


def fused_step(
    c: TransformerConfig,
    tokens: Count,
    pairs: Count,
    kv_tokens: Count,
    weight_bytes: float = 2,
    group_size: int | None = None,
    kv_bytes: int = 2,
    param_bytes: int = 2,
) -> Kernel:
    """The FLOPs and compulsory bytes of a whole forward step, as one kernel.

    ``2 Psi_mm`` FLOPs per new token and ``4 L H d`` per (query, key) pair; every
    matmul weight read once, plus one 2-byte scale per ``group_size`` weights, the
    norm gains and biases, one embedding row per new token (a gather: the table is
    not read), and the keys and values of ``kv_tokens`` tokens read or written.

    Args:
        c: a dense model (no mixture-of-experts layers).
        tokens: new tokens of the step.
        pairs: (query, key) pairs attended, over all the step's sequences.
        kv_tokens: tokens whose keys and values the step moves.
        weight_bytes: per matmul weight (2: bf16; 0.5: int4).
        group_size: weights per scale of quantized weights; ``None``: no scales.
        kv_bytes: per cached element (2: bf16).
        param_bytes: per unquantized parameter: norms, biases, embedding rows.

    Raises:
        ValueError: a mixture-of-experts model.
    """
    if c.n_moe_layers:
        raise ValueError("c must be a dense model (no mixture-of-experts)")
    psi = matmul_parameters(c)  # the weights a token meets: all of them
    flops = 2 * psi * tokens + attention_flops_per_token(c, 1) // 3 * pairs
    # region step-bytes
    n = count_parameters(c)
    norms_biases = n.total - n.embedding - n.head - (psi - c.vocab_size * c.d_model)
    rows = (2 if c.position == "learned" else 1) * c.d_model  # token (+ position)
    weights = psi * weight_bytes + (2 * psi / group_size if group_size else 0)
    weights += (norms_biases + rows * tokens) * param_bytes
    moved = weights + kv_bytes_per_token(c, kv_bytes) * kv_tokens
    # endregion
    return Kernel("step", flops, moved)


def decode_step(
    c: TransformerConfig,
    batch: int,
    context: int,
    weight_bytes: float = 2,
    group_size: int | None = None,
    kv_bytes: int = 2,
) -> Kernel:
    """One decode step of ``batch`` sequences with ``context`` cached tokens each.

    Each sequence's new token attends to its ``context`` cached keys and itself;
    the step reads that cache and writes the new keys and values
    (:func:`fused_step`).

    Raises:
        ValueError: ``batch < 1`` or ``context < 0``, or as :func:`fused_step`.
    """
    if not (isinstance(batch, int) and batch >= 1):
        raise ValueError(f"batch must be an integer >= 1, got {batch!r}")
    if not (isinstance(context, int) and context >= 0):
        raise ValueError(f"context must be an integer >= 0, got {context!r}")
    kv = batch * (context + 1)  # read the cache, write the new token's K and V
    return fused_step(c, batch, kv, kv, weight_bytes, group_size, kv_bytes)


def decode_step_bytes(
    c: TransformerConfig,
    batch: int,
    context: int,
    weight_bytes: float = 2,
    kv_bytes: int = 2,
) -> float:
    """Bytes one decode step moves through HBM: the one count every page uses.

    Every matmul weight, norm and bias once (shared by the batch), one embedding
    row per sequence, and each sequence's cache of ``context`` tokens read and its
    new token's keys and values written (:func:`decode_step`).

    Args:
        c: a dense model.
        batch: sequences decoded together (they share the weight read).
        context: cached positions per sequence.
        weight_bytes: per matmul weight (2: bf16).
        kv_bytes: per cached element (2: bf16).

    Raises:
        ValueError: ``batch < 1``, ``context < 0`` or a mixture-of-experts model.
    """
    return float(decode_step(c, batch, context, weight_bytes, None, kv_bytes).bytes)


def roof_time(k: Kernel, gpu: Gpu, fmt: str = "bf16") -> np.ndarray | float:
    """Seconds of ``k`` at its roof, ``max(FLOPs / F, bytes / W)``, per element.

    ``F``: the dense peak of the format the math runs in; ``W``: HBM bandwidth.
    """
    compute, memory = k.flops / gpu.peak_flops(fmt), k.bytes / gpu.hbm_bandwidth
    if isinstance(compute, np.ndarray) or isinstance(memory, np.ndarray):
        return np.maximum(compute, memory)
    return max(compute, memory)


class StepCost(Protocol):
    """Seconds one step takes."""

    def __call__(
        self, chunks: Sequence[Chunk], n_decode: int, decode_context: np.ndarray | int
    ) -> np.ndarray | float:
        """Time of a step of prompt ``chunks`` and ``n_decode`` decoding sequences.

        Args:
            chunks: ``(c, s)`` per prompt: ``c`` new tokens after ``s`` cached ones.
            n_decode: sequences that decode one token each.
            decode_context: tokens cached by those sequences, summed; an array
                gives the times of a run of decode-only steps at once.

        Returns:
            Seconds (an array if ``decode_context`` is one).
        """
        ...


@dataclass(frozen=True)
class LinearStepCost:
    """``fixed + per_token x (new tokens)`` seconds per step."""

    fixed: float
    per_token: float = 0.0

    def __call__(
        self, chunks: Sequence[Chunk], n_decode: int, decode_context: np.ndarray | int
    ) -> np.ndarray | float:
        """Time of a step: the cache does not count (see :class:`StepCost`)."""
        tokens = sum(c for c, _ in chunks) + n_decode
        return self.fixed + self.per_token * tokens + 0 * np.asarray(decode_context)


class RooflineStepCost:
    """Roofline time of one step of a dense model on one GPU (bf16 weights, cache).

    Args:
        config: a dense model (no mixture-of-experts layers).
        gpu: its dense BF16 peak ``F`` and HBM bandwidth ``W``.
        overhead: seconds added to every step, >= 0.

    Raises:
        ValueError: a mixture-of-experts model, or ``overhead`` < 0.
    """

    def __init__(
        self, config: TransformerConfig, gpu: Gpu, overhead: float = 0.0
    ) -> None:
        if config.n_moe_layers:
            raise ValueError("config must be a dense model (no mixture-of-experts)")
        if not overhead >= 0:
            raise ValueError(f"overhead must be >= 0 seconds, got {overhead!r}")
        self.config, self.gpu, self.overhead = config, gpu, overhead
        self.kv_bytes = kv_bytes_per_token(config, 2)  # per cached token, bf16

    def __call__(
        self, chunks: Sequence[Chunk], n_decode: int, decode_context: np.ndarray | int
    ) -> np.ndarray | float:
        """Roofline time of a step (see :class:`StepCost`)."""
        # region step-cost
        tokens, pairs, cached = n_decode, decode_context + n_decode, decode_context
        for c, s in chunks:  # c new tokens after s cached: they attend s+1 ... s+c
            tokens, cached = tokens + c, cached + s
            pairs = pairs + c * s + c * (c + 1) // 2
        kv = cached + tokens  # keys and values read, and written for the new tokens
        step = fused_step(self.config, tokens, pairs, kv)  # FLOPs and bytes
        seconds = roof_time(step, self.gpu) + self.overhead
        # endregion
        return seconds
