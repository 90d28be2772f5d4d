"""The planner: every valid layout of a job, priced, the feasible ones best first.

A layout is valid when the sizes fit the model, the batch and the machine:

- ``dp tp pp cp`` equals the GPUs;
- tp divides the heads, the KV heads and the GPUs of a node (a TP group stays in
  its NVLink node; :mod:`aiinfra.plan.mesh`), and, with sequence parallelism,
  T / cp;
- cp divides T; pp is at most L and leaves no stage empty (the busiest stage holds
  ceil(L / pp) layers, so Llama 3 405B's 126 layers can run on 16 stages);
- dp divides the sequences of the step, B = global batch / T, and b (at most
  :data:`MAX_MICRO_BATCH`) divides B / dp, giving m = B / (dp b) micro-batches;
- v > 1 (interleaved 1F1B) needs pp > 1, v dividing the stage's layers and m a
  multiple of pp (Megatron-LM's rounds of pp micro-batches, and
  :func:`aiinfra.parallel.pipeline.schedules.interleaved_1f1b`): only there is the
  bubble (pp - 1) / (v m), which the cost model prices; with m < pp a replay of
  the schedule shows a far larger one;
- ZeRO stages 1-3 need a shard group of more than one rank.

It is feasible when the stage's memory (:mod:`aiinfra.plan.stage_memory`) fits in
``memory_fraction`` of the GPU's HBM. Recomputation only adds time in the cost
model, so a layout is listed with the least recomputation that fits (none, then
selective, then full). Feasible layouts are sorted by estimated step time
(:mod:`aiinfra.plan.cost`); ties go to the layout with fewer model-parallel ranks
(tp pp cp), then to the smaller memory.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.plan.cost import StepTime, step_time
from aiinfra.plan.job import Job, Layout
from aiinfra.plan.stage_memory import StageMemory, stage_memory

ZERO_STAGES = (0, 1, 2, 3)
CHUNKS = (1, 2, 4, 8)  # v tried for interleaved 1F1B
MAX_MICRO_BATCH = 8  # b tried: divisors of B / dp up to this many sequences


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending."""
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


@dataclass(frozen=True)
class Plan:
    """A layout with its memory and time.

    Attributes:
        layout: the configuration.
        memory: bytes per GPU of its busiest stage.
        time: the step's terms and MFU.
    """

    layout: Layout
    memory: StageMemory
    time: StepTime


def _rank_key(p: Plan) -> tuple[float, int, float]:
    """Step time (to the microsecond), then fewer model-parallel ranks, then memory."""
    lay = p.layout
    return (round(p.time.step, 6), lay.tp * lay.pp * lay.cp, p.memory.total)


def _sizes(job: Job) -> itertools.product:
    """(dp, tp, pp, cp) whose product is the GPUs and that fit model and batch."""
    cfg, seq = job.model, job.seq
    for tp in divisors(job.gpus):
        if cfg.n_heads % tp or cfg.n_kv_heads % tp or job.gpus_per_node % tp:
            continue
        for cp in divisors(job.gpus // tp):
            if seq % cp or (tp > 1 and (seq // cp) % tp):
                continue
            for pp in divisors(job.gpus // (tp * cp)):
                layers = -(-cfg.n_layers // pp)
                if pp > cfg.n_layers or layers * (pp - 1) >= cfg.n_layers:
                    continue
                dp = job.gpus // (tp * cp * pp)
                if job.sequences % dp == 0:
                    yield dp, tp, pp, cp


def valid_layouts(job: Job) -> list[Layout]:
    """Every valid layout of ``job`` (see the module docstring), before memory.

    Args:
        job: the job.

    Returns:
        The layouts, in enumeration order.
    """
    out = []
    for dp, tp, pp, cp in _sizes(job):
        per_replica = job.sequences // dp
        stage = -(-job.model.n_layers // pp)
        chunks = [v for v in CHUNKS if v == 1 or (pp > 1 and stage % v == 0)]
        zeros = ZERO_STAGES if dp * cp > 1 else (0,)
        micro = [b for b in divisors(per_replica) if b <= MAX_MICRO_BATCH]
        for zero, b, v, recompute in itertools.product(
            zeros, micro, chunks, job.recompute_choices
        ):
            if v > 1 and (per_replica // b) % pp:  # m not in rounds of pp
                continue
            out.append(Layout(dp, tp, pp, cp, zero, b, recompute, v))
    return out


def evaluate(job: Job, layout: Layout) -> Plan:
    """Memory and step time of one layout."""
    return Plan(layout, stage_memory(job, layout), step_time(job, layout))


def plan(job: Job, top: int | None = None) -> list[Plan]:
    """The feasible layouts of ``job``, fastest first.

    Args:
        job: the job and its assumptions.
        top: keep this many (``None``: all).

    Returns:
        Plans sorted by step time, then by tp pp cp, then by memory per GPU.

    Raises:
        ValueError: ``top`` is not a positive int, no layout is valid (the sizes
            cannot factor the GPUs within the model's and the batch's divisors),
            or none fits in memory (the message gives the smallest need).
    """
    if top is not None:
        checks.positive_int("top", top)
    layouts = valid_layouts(job)
    if not layouts:
        raise ValueError(
            f"gpus must factor as dp x tp x pp x cp = {job.gpus} within the model "
            f"({job.model.n_heads} heads, {job.model.n_kv_heads} KV heads, "
            f"{job.model.n_layers} layers), seq = {job.seq} and "
            f"{job.sequences} sequences per step"
        )
    limit = job.memory_fraction * GPUS[job.gpu].hbm_bytes
    plans, smallest, fitted = [], float("inf"), set()
    for layout in layouts:  # recompute options come cheapest first
        rest = (layout.dp, layout.tp, layout.pp, layout.cp, layout.zero)
        rest += (layout.micro_batch, layout.v)
        if rest in fitted:  # fits with less recomputation: no slower layout listed
            continue
        memory = stage_memory(job, layout)
        smallest = min(smallest, memory.total)
        if memory.total <= limit:
            fitted.add(rest)
            plans.append(Plan(layout, memory, step_time(job, layout)))
    if not plans:
        raise ValueError(
            f"gpus must be more than {job.gpus} (or the batch smaller): no layout fits "
            f"in {limit / 1e9:.1f} GB per GPU; the smallest needs "
            f"{smallest / 1e9:.1f} GB"
        )
    plans.sort(key=_rank_key)
    return plans[:top]
