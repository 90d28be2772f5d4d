"""What ``docs/training/pipeline.rst`` shows: its values, tables, figures.

Every timeline replays a schedule of :mod:`aiinfra.parallel.pipeline.schedules` on the
cost model of :mod:`aiinfra.parallel.pipeline.simulator` with the zero-bubble paper's
assumption t_F = t_B = t_W (Qi et al. 2024; a backward that is not split takes t_B +
t_W) and no communication latency: p = 4 ranks, m = 8 micro-batches, v = 2 chunks per
rank for the interleaved schedule.
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.models.presets import preset
from aiinfra.parallel.pipeline import figures as pipeline_figures
from aiinfra.parallel.pipeline.schedules import make_schedule, p2p_messages
from aiinfra.parallel.pipeline.simulator import (
    PipelineCosts,
    PipelineTimeline,
    simulate,
)
from aiinfra.plan import figures as plan_figures
from aiinfra.plan.job import Job, Layout
from aiinfra.plan.stage_profile import StageLoad, stage_profile
from aiinfra.report import Table

PP_RANKS, PP_MICROBATCHES, PP_CHUNKS = 4, 8, 2  # p, m, v of the examples
PP_LAYERS = 8  # L of the stage picture: 2 layers per rank, 1 per chunk when v = 2
PP_SWEEP = (4, 8, 12, 16, 24, 32)  # m of the bubble figure: multiples of p
PP_NAMES = ("GPipe", "1F1B", "interleaved 1F1B", "ZB-H1")
_COSTS = PipelineCosts(t_f=1.0, t_b=1.0, t_w=1.0)


def _check(name: str) -> None:
    if name not in PP_NAMES:
        raise ValueError(f"name must be one of {PP_NAMES}, got {name!r}")


@functools.cache
def _pp_timeline(name: str, m: int = PP_MICROBATCHES) -> PipelineTimeline:
    """The example's simulated step of schedule ``name`` with m micro-batches.

    Raises:
        ValueError: an unknown name, or m the schedule rejects.
    """
    _check(name)
    v = PP_CHUNKS if name == "interleaved 1F1B" else 1
    return simulate(make_schedule(name, PP_RANKS, m, v), _COSTS)


def pp_bubble(name: str) -> float:
    """Simulated idle time over compute time of the example, a fraction."""
    return _pp_timeline(name).bubble_over_ideal


def pp_step_bubble(name: str, m: int = PP_MICROBATCHES) -> float:
    """Simulated idle share of the step, a fraction."""
    return _pp_timeline(name, m).bubble


def _pp_published_bubble(name: str) -> float:
    """The papers' bubble over ideal compute for the example's p, m, v.

    GPipe and 1F1B (p - 1) / m, interleaved (p - 1) / (v m) (Narayanan et al.
    2021), ZB-H1 (p - 1) / (3 m) (Qi et al. 2024).
    """
    _check(name)
    p, m, v = PP_RANKS, PP_MICROBATCHES, PP_CHUNKS
    divisor = {"interleaved 1F1B": v, "ZB-H1": 3}.get(name, 1)
    return (p - 1) / (divisor * m)


def pp_gpipe_published_step_bubble(m: int = PP_MICROBATCHES) -> float:
    """GPipe's idle share of the step, (p - 1) / (m + p - 1) (Huang et al. 2019)."""
    return (PP_RANKS - 1) / (m + PP_RANKS - 1)


def pp_warmup(name: str, rank: int = 0) -> int:
    """Forwards rank ``rank`` runs before its first backward in the example."""
    order = _pp_timeline(name).schedule.order(rank)
    return next(k for k, a in enumerate(order) if a.kind != "F")


def pp_peak(name: str, rank: int = 0) -> float:
    """Activations rank ``rank`` holds at its peak, in micro-batches of its layers."""
    return _pp_timeline(name).peak_activations()[rank]


def pp_messages(name: str) -> int:
    """Point-to-point messages in one step of the example, all ranks together."""
    return p2p_messages(_pp_timeline(name).schedule)


def pp_tradeoff_table() -> Table:
    """Bubble, peak activations and messages of the four schedules, simulated."""
    rows = []
    for name in PP_NAMES:
        t = _pp_timeline(name)
        rows.append(
            [
                name,
                round(t.bubble_over_ideal, 4),
                round(_pp_published_bubble(name), 4),
                round(t.peak_activations()[0], 2),
                round(t.peak_activations()[-1], 2),
                pp_messages(name),
            ]
        )
    return Table(
        [
            "schedule",
            "bubble, replay",
            "bubble, paper",
            "peak, rank 0",
            "peak, last rank",
            "messages",
        ],
        rows,
        note="Simulated on the cost model t_F = t_B = t_W, no latency. Bubble: idle "
        "time over compute time. Peak: micro-batches of activations through all of "
        "a rank's layers, held at once. Messages: point-to-point sends of "
        "activations and input gradients per step, all ranks together.",
        stamp=f"p = {PP_RANKS}, k = {PP_MICROBATCHES}, v = {PP_CHUNKS}",
    )


def _panels(*names: str) -> list[tuple[str, PipelineTimeline]]:
    titles = {"interleaved 1F1B": f"interleaved 1F1B, v = {PP_CHUNKS}"}
    return [(titles.get(n, n), _pp_timeline(n)) for n in names]


def pp_gpipe_figure() -> Figure:
    """One micro-batch (naive model parallelism) against GPipe's m."""
    naive = ("one micro-batch", _pp_timeline("GPipe", 1))
    return pipeline_figures.timeline_figure([naive, *_panels("GPipe")])


def pp_1f1b_figure() -> Figure:
    """GPipe and 1F1B: the same bubble, the backwards moved forward."""
    return pipeline_figures.timeline_figure(_panels("GPipe", "1F1B"))


def pp_interleaved_figure() -> Figure:
    """1F1B and interleaved 1F1B with v chunks per rank."""
    return pipeline_figures.timeline_figure(_panels("1F1B", "interleaved 1F1B"))


def pp_zero_bubble_figure() -> Figure:
    """1F1B and ZB-H1: the split backward's W fill the cool-down."""
    return pipeline_figures.timeline_figure(_panels("1F1B", "ZB-H1"))


def pp_stage_figure() -> Figure:
    """Which rank holds each layer, with one and with v chunks per rank."""
    return pipeline_figures.stage_figure(PP_LAYERS, PP_RANKS, (1, PP_CHUNKS))


def pp_bubble_figure() -> Figure:
    """Bubble against m: simulated points on the published curves."""
    return pipeline_figures.bubble_figure(PP_RANKS, PP_SWEEP, PP_CHUNKS)


# Pipeline depth: Llama 3 405B laid out as Table 4 (Dubey et al. 2024), plain 1F1B,
# one sequence per micro-batch, ZeRO-2, fp32 gradients, 16M-token batches.
PP_DEPTH_MODEL, PP_DEPTH_GPUS, PP_DEPTH_BATCH = "llama-3-405b", 16384, 2**24
PP_DEPTH_LAYOUT = Layout(dp=128, tp=8, pp=16, cp=1, zero=2, micro_batch=1)
PP_DEPTH_TRIMS = {  # trim -> label; trim 0 is the planner's ceil(L / pp) per stage
    0: "the same layers on every stage",
    1: "one layer fewer on the first and last stage",
}


@functools.cache
def _depth_profile(trim: int) -> tuple[StageLoad, ...]:
    job = Job(
        preset(PP_DEPTH_MODEL),
        "H100",
        PP_DEPTH_GPUS,
        PP_DEPTH_BATCH,
        8192,
        grad_dtype="fp32",
    )
    if trim:
        return tuple(stage_profile(job, PP_DEPTH_LAYOUT, trim))
    even = -(-job.model.n_layers // PP_DEPTH_LAYOUT.pp)  # ceil(L / pp), as priced
    return tuple(
        stage_profile(job, PP_DEPTH_LAYOUT, layers=[even] * PP_DEPTH_LAYOUT.pp)
    )


def _rank(rank: int | str) -> int:
    return -1 if rank == "last" else int(rank)


def pp_depth_size(name: str) -> int:
    """``pp``, ``tp``, ``dp`` or ``L`` (layers) of the depth example."""
    if name == "L":
        return preset(PP_DEPTH_MODEL).n_layers
    return getattr(PP_DEPTH_LAYOUT, name)


def pp_depth_layers(rank: int | str, trim: int = 0) -> int:
    """Layers on pipeline rank ``rank`` ("last": the last) of the depth example."""
    return _depth_profile(trim)[_rank(rank)].layers


def pp_depth_gb(rank: int | str, trim: int = 0) -> float:
    """GB per GPU on pipeline rank ``rank`` ("last": the last) of the depth example."""
    return _depth_profile(trim)[_rank(rank)].total / 1e9


def pp_depth_activations_gb(rank: int | str, trim: int = 0) -> float:
    """GB of activations in flight on pipeline rank ``rank`` of the depth example."""
    return _depth_profile(trim)[_rank(rank)].activations / 1e9


def pp_depth_head_layers() -> float:
    """The output head's training FLOPs in units of one layer's, 405B."""
    last = _depth_profile(0)[-1]
    return last.work - last.layers


def pp_depth_work(rank: int | str, trim: int = 0) -> float:
    """Work of pipeline rank ``rank`` ("last": the last), in layers, depth example."""
    return _depth_profile(trim)[_rank(rank)].work


def pp_depth_figure() -> Figure:
    """Work and memory per pipeline rank of Llama 3 405B, split two ways."""
    profiles = {label: _depth_profile(t) for t, label in PP_DEPTH_TRIMS.items()}
    return plan_figures.stage_profile_figure(profiles, GPUS["H100"].hbm_bytes / 1e9)
