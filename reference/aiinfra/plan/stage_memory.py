"""Memory per GPU of a layout: the book's calculator, stage by stage.

:func:`aiinfra.memory.calculator.estimate_memory` prices one rank that holds the
whole depth of the model and one micro-batch of activations. Three things of a
layout it does not know are built around it here, without changing it. Context
parallelism: each rank holds T / cp tokens of every sequence, so the calculator is
called with ``seq = T / cp`` (the K/V blocks in flight during ring attention are not
counted). Pipeline parallelism: a rank holds ceil(L / pp) layers, so the calculator
is called on a copy of the config with that many layers and one V x h matrix (the
first stage's embedding; the last stage's head has the same size), and activations
of several micro-batches are alive at once. How many follows from the schedule:
1F1B keeps min(pp - r, m) micro-batches on pipeline rank r (Narayanan et al. 2021),
so at most pp on the first; interleaved 1F1B warms up with 2 (pp - r - 1) +
(v - 1) pp chunks of 1/v of the stage each, plus one (Megatron-LM's
``schedules.py``). The logits live on the last stage only, one micro-batch at a
time. The peak is the larger of the first and the last stage. With ``pp = 1`` the
result is the calculator's own total.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from aiinfra.memory.calculator import MemoryEstimate, estimate_memory
from aiinfra.models.config import TransformerConfig
from aiinfra.plan.job import Job, Layout


def in_flight(pp: int, m: int, v: int, rank: int) -> float:
    """Micro-batches of activations alive at once on pipeline rank ``rank``.

    Args:
        pp: pipeline stages (ranks).
        m: micro-batches per step.
        v: model chunks per rank; 1 is plain 1F1B.
        rank: the pipeline rank, 0 (first) to ``pp - 1``.

    Returns:
        Whole-stage micro-batches (a chunk counts 1/v): ``min(pp - rank, m)``
        for 1F1B, ``min(2 (pp - rank - 1) + (v - 1) pp + 1, v m) / v`` interleaved.
    """
    if v == 1:
        return min(pp - rank, m)
    return min(2 * (pp - rank - 1) + (v - 1) * pp + 1, v * m) / v


@dataclass(frozen=True)
class StageMemory:
    """Bytes per GPU of the busiest stage, by part.

    Attributes:
        params, grads, optimizer: model states on the rank.
        activations: activations of the micro-batches in flight.
        logits: the fp32 logits the loss keeps (last stage only).
        in_flight: micro-batches whose activations are kept.
        stage: which pipeline stage this is (``"first"``, ``"last"``, ``"only"``).
    """

    params: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    in_flight: float
    stage: str

    @property
    def total(self) -> float:
        """All parts, bytes."""
        return (
            self.params + self.grads + self.optimizer + self.activations + self.logits
        )


@functools.lru_cache(maxsize=256)
def _stage_model(fields: tuple, layers: int) -> TransformerConfig:
    return TransformerConfig(
        **{**dict(fields), "n_layers": layers, "tie_embeddings": True}
    )


def stage_model(model: TransformerConfig, layers: int) -> TransformerConfig:
    """``model`` cut to one pipeline stage: ``layers`` layers and one V x h matrix.

    Args:
        model: the whole model.
        layers: the stage's layers.

    Returns:
        A copy with ``n_layers = layers`` and ``tie_embeddings = True`` (cached: a
        search asks for the same few stages thousands of times).
    """
    return _stage_model(tuple(vars(model).items()), layers)


def calculator_estimate(job: Job, layout: Layout) -> MemoryEstimate:
    """The calculator on one stage of ``layout``: one micro-batch, T / cp tokens.

    ``layout.v`` plays no part; the result is cached per job and sizes.
    """
    return _estimate(
        job,
        layout.dp,
        layout.tp,
        layout.pp,
        layout.cp,
        layout.zero,
        layout.micro_batch,
        layout.recompute,
        layout.stage_layers(job),
    )


def stage_estimate(job: Job, layout: Layout, layers: int) -> MemoryEstimate:
    """The calculator on a stage of ``layout`` that holds ``layers`` layers.

    As :func:`calculator_estimate`, for a stage of any depth (one V x h matrix).
    """
    return _estimate(
        job,
        layout.dp,
        layout.tp,
        layout.pp,
        layout.cp,
        layout.zero,
        layout.micro_batch,
        layout.recompute,
        layers,
    )


@functools.lru_cache(maxsize=4096)
def _estimate(
    job: Job,
    dp: int,
    tp: int,
    pp: int,
    cp: int,
    zero: int,
    b: int,
    recompute: str,
    layers: int,
) -> MemoryEstimate:
    cfg = stage_model(job.model, layers) if pp > 1 else job.model
    return estimate_memory(
        cfg,
        seq=job.seq // cp,
        micro_batch=b,
        tp=tp,
        sp=tp > 1,  # sequence parallelism whenever there is TP
        recompute=recompute,
        zero=zero,
        dp=dp * cp,  # ZeRO shards over the dp cp group
        attention=job.attention,
        grad_dtype=job.grad_dtype,
    )


def stage_memory(job: Job, layout: Layout) -> StageMemory:
    """Peak bytes per GPU of ``layout``: the larger of its first and last stage.

    Args:
        job: the job (model, sequence, batch, attention, gradient layout).
        layout: a valid layout for the job (see :mod:`aiinfra.plan.search`).

    Returns:
        The busiest stage's parts.
    """
    est = calculator_estimate(job, layout)
    pp, m, v = layout.pp, layout.micro_batches(job), layout.v
    states = (est.params, est.grads, est.optimizer)
    if pp == 1:
        return StageMemory(*states, est.activations, est.logits, 1, "only")
    first_n, last_n = in_flight(pp, m, v, 0), in_flight(pp, m, v, pp - 1)
    first = StageMemory(*states, first_n * est.activations, 0.0, first_n, "first")
    last = StageMemory(*states, last_n * est.activations, est.logits, last_n, "last")
    return max(first, last, key=lambda s: s.total)
