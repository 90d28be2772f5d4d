"""Memory per GPU of a layout: the book's calculator, called stage by stage.

Ground truths: :func:`aiinfra.memory.calculator.estimate_memory` called directly
(with no pipeline the planner's number is its total, byte for byte); the
in-flight counts of 1F1B (Narayanan et al. 2021: at most p micro-batches on the
first stage; FACTS.md "Pipeline parallelism") and of Megatron-LM's interleaved
schedule (``schedules.py``: warm-up 2 (p - r - 1) + (v - 1) p, capped at all
v m chunks).
"""

from __future__ import annotations

import dataclasses

import pytest
from aiinfra.memory.calculator import estimate_memory
from aiinfra.models.presets import preset
from aiinfra.plan.job import Job, Layout
from aiinfra.plan.stage_memory import in_flight, stage_memory


def _job(gpus=8, batch=2**20):
    return Job(preset("llama-3-8b"), "H100", gpus, batch, 8192)


def test_without_pipeline_the_memory_is_the_calculators_total():
    job = _job()
    layout = Layout(dp=4, tp=1, pp=1, cp=2, zero=1, micro_batch=1)
    direct = estimate_memory(
        preset("llama-3-8b"),
        seq=4096,
        micro_batch=1,
        tp=1,
        zero=1,
        dp=8,
        attention="flash",
    )
    assert stage_memory(job, layout).total == direct.total
    layout = Layout(dp=2, tp=2, pp=1, cp=2, zero=3, micro_batch=2, recompute="full")
    direct = estimate_memory(
        preset("llama-3-8b"),
        seq=4096,
        micro_batch=2,
        tp=2,
        sp=True,
        recompute="full",
        zero=3,
        dp=4,
        attention="flash",
    )
    assert stage_memory(job, layout).total == direct.total


def test_first_pipeline_stage_keeps_p_micro_batches_of_its_layers():
    job = _job(gpus=8, batch=2**20)  # 128 sequences
    layout = Layout(dp=2, tp=1, pp=4, cp=1, zero=0, micro_batch=1)  # m = 64
    stage_cfg = dataclasses.replace(
        preset("llama-3-8b"), n_layers=8, tie_embeddings=True
    )
    one = estimate_memory(stage_cfg, seq=8192, micro_batch=1, attention="flash")
    mem = stage_memory(job, layout)
    assert mem.stage == "first" and mem.in_flight == 4
    assert mem.activations == 4 * one.activations
    assert mem.params == one.params and mem.optimizer == one.optimizer
    assert mem.logits == 0  # the head is on the last stage


def test_in_flight_counts_of_1f1b_and_interleaved():
    assert [in_flight(4, 64, 1, r) for r in range(4)] == [4, 3, 2, 1]
    assert in_flight(4, 2, 1, 0) == 2  # fewer micro-batches than stages
    # Interleaved, p = 4, v = 2: rank 0 warms up 2*3 + 1*4 = 10 chunks, + 1.
    assert in_flight(4, 64, 2, 0) == pytest.approx(11 / 2)
    assert in_flight(4, 64, 2, 3) == pytest.approx(5 / 2)
    # m = p: every chunk is in warm-up, so all m micro-batches are alive.
    assert in_flight(16, 16, 8, 0) == 16
