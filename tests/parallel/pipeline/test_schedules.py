"""Pipeline schedules and their simulated timelines against the published formulas.

Ground truths: the bubble formulas of FACTS.md ("Pipeline parallelism"): GPipe
(Huang et al. 2019) idles (p - 1) / (m + p - 1) of its step; relative to ideal
compute GPipe and 1F1B lose (p - 1) / m, interleaved 1F1B (1 / v)(p - 1) / m
(Narayanan et al. 2021, Sec. 2.2); ZB-H1 (Qi et al. 2024, Sec. 2.1, under its
assumption t_F = t_B = t_W) (p - 1) / (3 m), in general (p - 1)(t_F + t_B - t_W)
of idle time per rank. Memory: GPipe stores m micro-batches, 1F1B p - r on rank r,
ZB-H1 p on every rank. The orders: torch.distributed.pipelining's own schedules,
built on stand-in stages without a process group.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from aiinfra.parallel.pipeline.executor import stage_layers
from aiinfra.parallel.pipeline.schedules import (
    gpipe,
    interleaved_1f1b,
    make_schedule,
    one_f_one_b,
    one_f_one_b_order,
    p2p_messages,
    zb_h1,
)
from aiinfra.parallel.pipeline.simulator import PipelineCosts, simulate
from torch.distributed.pipelining import schedules as torch_schedules

PS = (1, 2, 3, 4, 8)  # ranks


def _ms(p: int) -> tuple[int, ...]:
    """Micro-batch counts for p ranks: as few as 1F1B allows, odd, many."""
    return (p, p + 1, 2 * p, 4 * p + 3)


COSTS = [  # a full backward (t_b + t_w) of 2, 1 and 1.5 forwards
    PipelineCosts(1, 1, 1),
    PipelineCosts(1, 0.5, 0.5),
    PipelineCosts(2, 2, 1),
]
TOL = 1e-12


@pytest.mark.parametrize("p", PS)
def test_gpipe_and_1f1b_idle_p_minus_1_over_m(p):
    for m in _ms(p):
        for costs in COSTS:
            g, f = simulate(gpipe(p, m), costs), simulate(one_f_one_b(p, m), costs)
            step = (p - 1) / (m + p - 1)  # of GPipe's step (Huang et al. 2019)
            assert abs(g.bubble - step) < TOL, (m, costs)
            assert abs(g.bubble_over_ideal - (p - 1) / m) < TOL, (m, costs)
            assert abs(f.bubble_over_ideal - (p - 1) / m) < TOL, (m, costs)


@pytest.mark.parametrize("p", PS)
def test_interleaving_divides_the_bubble_by_v(p):
    for m in (p, 2 * p, 3 * p):
        for v in (2, 3, 4):
            for costs in COSTS:
                t = simulate(interleaved_1f1b(p, m, v), costs)
                expected = (p - 1) / (v * m)
                assert abs(t.bubble_over_ideal - expected) < TOL, (m, v, costs)


@pytest.mark.parametrize("p", PS)
def test_zb_h1_bubble_is_a_third_of_1f1b(p):
    for m in _ms(p):
        t = simulate(zb_h1(p, m), PipelineCosts(1, 1, 1))  # Qi et al.: all equal
        assert abs(t.bubble_over_ideal - (p - 1) / (3 * m)) < TOL, m


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 9)])
@pytest.mark.parametrize("costs", [PipelineCosts(1, 2, 1), PipelineCosts(1, 1, 0.5)])
def test_zb_h1_idles_p_minus_1_times_tf_plus_tb_minus_tw(p, m, costs):
    t = simulate(zb_h1(p, m), costs)
    idle = t.step - m * (costs.t_f + costs.t_b + costs.t_w)  # per rank
    assert abs(idle - (p - 1) * (costs.t_f + costs.t_b - costs.t_w)) < TOL


@pytest.mark.parametrize("p", PS)
def test_peak_micro_batches_in_flight(p):
    for m in _ms(p):
        assert simulate(gpipe(p, m)).peak_in_flight == (m,) * p
        one_f_one_b_peaks = tuple(p - r for r in range(p))  # Narayanan et al.
        assert simulate(one_f_one_b(p, m)).peak_in_flight == one_f_one_b_peaks
        assert simulate(zb_h1(p, m)).peak_in_flight == (p,) * p  # Qi et al.
        if m % p == 0 and m > p > 1:  # interleaving stores more than 1F1B on rank 0
            assert simulate(interleaved_1f1b(p, m, 2)).peak_activations()[0] > p


@pytest.mark.parametrize("p", [2, 4])
def test_latency_adds_two_hops_per_stage_to_gpipe(p):
    costs = PipelineCosts(1, 2, 0, latency=0.25)
    m = 6  # forward fill and backward drain each cross p - 1 links
    expected = (m + p - 1) * 3 + 2 * (p - 1) * 0.25
    assert abs(simulate(gpipe(p, m), costs).step - expected) < TOL


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("v", [1, 2])
def test_p2p_messages_per_step(p, v):
    s = make_schedule("interleaved 1F1B" if v > 1 else "1F1B", p, 2 * p, v)
    assert p2p_messages(s) == 2 * s.m * (p * v - 1)  # each boundary, both ways


def _torch_orders(cls, p: int, m: int, v: int) -> list[list[tuple]]:
    """torch's ``pipeline_order``: (microbatch, chunk, kind) per rank, idle dropped."""
    stages = [
        SimpleNamespace(
            num_stages=p * v, group_size=p, group_rank=0, submod=torch.nn.Module()
        )
        for _ in range(v)
    ]
    single = cls in (torch_schedules.ScheduleGPipe, torch_schedules.Schedule1F1B)
    schedule = cls(stages[0] if single else stages, m)
    kinds = {"F": "F", "B": "B", "I": "B", "W": "W"}  # I: torch's input-only B
    return [
        [
            (a.microbatch_index, a.stage_index // p, kinds[a.computation_type.value])
            for a in schedule.pipeline_order[r]
            if a is not None and a.computation_type.value in kinds
        ]
        for r in range(p)
    ]


def _ours(schedule) -> list[list[tuple]]:
    return [
        [(a.microbatch, a.chunk, a.kind) for a in schedule.order(r)]
        for r in range(schedule.p)
    ]


@pytest.mark.parametrize(
    ("name", "cls", "v"),
    [
        ("GPipe", torch_schedules.ScheduleGPipe, 1),
        ("interleaved 1F1B", torch_schedules.ScheduleInterleaved1F1B, 2),
        ("interleaved 1F1B", torch_schedules.ScheduleInterleaved1F1B, 3),
        ("ZB-H1", torch_schedules.ScheduleInterleavedZeroBubble, 1),
    ],
)
@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 4), (4, 8), (4, 12), (8, 16)])
def test_orders_equal_torch_pipelining(name, cls, v, p, m):
    assert _ours(make_schedule(name, p, m, v)) == _torch_orders(cls, p, m, v)


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 9)])
def test_1f1b_equals_torch_but_for_its_last_rank_off_by_one(p, m):
    ours, theirs = (
        _ours(one_f_one_b(p, m)),
        _torch_orders(torch_schedules.Schedule1F1B, p, m, 1),
    )
    assert ours[:-1] == theirs[:-1]
    # torch's pipeline_order for the last rank numbers forwards from 1 to m (the
    # micro-batch m does not exist); its run loop does what ours does (below).
    shifted = [(i + (k == "F"), c, k) for i, c, k in ours[-1]]
    assert theirs[-1] == shifted


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 9)])
def test_1f1b_equals_deepspeeds_train_schedule(p, m):
    # optional (the parallel extra installs it): skip without; imported once
    ds = pytest.importorskip("deepspeed.runtime.pipe.schedule")

    for r, ours in enumerate(_ours(one_f_one_b(p, m))):
        train = ds.TrainSchedule(micro_batches=m, stages=p, stage_id=r)
        order = []
        for step, cmds in enumerate(train.steps()):
            if any(isinstance(c, ds.ForwardPass | ds.BackwardPass) for c in cmds):
                mb, forward = train._step_to_micro_batch(step)
                order.append((mb, 0, "F" if forward else "B"))
        assert order == ours, r


class _Recorder:
    """A stand-in stage: records the forwards and backwards a torch schedule runs."""

    def __init__(self, p: int, r: int) -> None:
        self.num_stages, self.stage_index, self.is_last = p, r, False
        self.ran: list[tuple] = []

    def __getattr__(self, name):  # p2p ops: none; everything else: no-op
        return (lambda *a, **k: []) if name.endswith("_ops") else (lambda *a, **k: 0)

    def forward_one_chunk(self, i, *args, **kwargs):
        self.ran.append((i, 0, "F"))

    def backward_one_chunk(self, i, *args, **kwargs):
        self.ran.append((i, 0, "B"))


@pytest.mark.parametrize(
    ("cls", "build"),
    [
        (torch_schedules.ScheduleGPipe, gpipe),
        (torch_schedules.Schedule1F1B, one_f_one_b),
    ],
)
@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8), (8, 9)])
def test_torch_run_loop_runs_our_order(cls, build, p, m):
    for r, order in enumerate(_ours(build(p, m))):
        stage = _Recorder(p, r)
        schedule = cls(stage, m, loss_fn=lambda *a: 0)
        schedule._stage_forward_initialized = True  # no shapes to exchange
        schedule._stage_backward_initialized = True
        schedule._step_microbatches()
        assert stage.ran == order, r


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: gpipe(0, 4), "p must be an int >= 1, got 0"),
        (lambda: gpipe(2, 2.0), "m must be an int >= 1, got 2.0"),
        (lambda: one_f_one_b(4, 3), "m must be >= p for 1F1B"),
        (lambda: zb_h1(4, 2), "m must be >= p for ZB-H1"),
        (lambda: one_f_one_b_order(4, 8, 4), "r must be an int in \\[0, 3\\], got 4"),
        (lambda: interleaved_1f1b(4, 6, 2), "m must be a multiple of p"),
        (lambda: interleaved_1f1b(4, 8, 1), "v must be an int >= 2, got 1"),
        (lambda: make_schedule("1F1B", 4, 8, 2), "v must be 1 for 1F1B"),
        (lambda: make_schedule("PipeDream", 4, 8), "name must be one of"),
        (lambda: PipelineCosts(t_f=-1), "t_f must be >= 0"),
        (lambda: PipelineCosts(0, 0, 0), "t_f \\+ t_b \\+ t_w must be > 0"),
        (lambda: stage_layers(4, 4, 2), "p \\* v = 8 stages but only n_layers = 4"),
        (lambda: stage_layers(12, 4, 2), "n_layers = 12 must be a multiple of p"),
        (lambda: stage_layers(8, 0), "p must be an int >= 1, got 0"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_stage_layers_split_evenly_in_order():
    assert stage_layers(8, 2, 2) == [range(0, 2), range(2, 4), range(4, 6), range(6, 8)]


def test_a_schedule_that_deadlocks_is_rejected():
    s = one_f_one_b(2, 2)
    swapped = tuple(  # rank 1 runs B0 before F0: it waits for itself
        a.__class__(a.rank, 1 - a.slot, a.microbatch, a.chunk, a.kind)
        if a.rank == 1 and a.slot < 2
        else a
        for a in s.actions
    )
    bad = s.__class__(s.name, s.p, s.m, s.v, tuple(sorted(swapped, key=_key)))
    with pytest.raises(ValueError, match="deadlocks"):
        simulate(bad)


def _key(a):
    return (a.rank, a.slot)
