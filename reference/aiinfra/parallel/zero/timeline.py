"""ZeRO-3's step on a cost model: how much communication prefetching hides.

Stage 3 all-gathers each unit's parameters before the unit computes, in forward and
again in backward, and reduce-scatters its gradients after. Done synchronously, the
step takes the sum of all compute and all communication.
:class:`~aiinfra.parallel.zero.stage3.Zero3` with ``prefetch`` starts the next unit's
all-gather while this unit computes and lets the reduce-scatter run behind the next
unit's backward; with ``reshard_after_forward=False`` backward needs no all-gather at
all. This module replays those rules on two streams, compute and communication (one
collective at a time, in the order they are issued, as on one NCCL stream), from
per-unit times.
:func:`layer_costs` takes the times from a transformer's layers: forward 2 Psi_u tau
FLOPs at the GPU's peak (backward twice that; Kaplan et al. 2020), and ring
collectives of the 2 Psi_u bytes of bf16 parameters or gradients in the alpha-beta
model of :mod:`aiinfra.comm.cost` (Thakur et al. 2005). Notation: Psi_u parameters
of a unit, tau tokens per GPU per step, p = N_d ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import (
    LINKS,
    LinkModel,
    ring_all_gather_time,
    ring_reduce_scatter_time,
)
from aiinfra.models.params import count_parameters, norm_parameters
from aiinfra.models.presets import preset
from aiinfra.parallel.data.figures import Span
from aiinfra.parallel.data.overlap import H100_LINKS


@dataclass(frozen=True)
class UnitCosts:
    """Seconds per unit, in forward order: compute and one collective of each kind."""

    forward: list[float]
    backward: list[float]
    gather: list[float]
    reduce: list[float]


@dataclass(frozen=True)
class Zero3Timeline:
    """One simulated step: what ran when, on each stream.

    Attributes:
        compute: forward spans (units 0..L-1), then backward spans (L-1..0).
        gathers: every all-gather, in issue order.
        reduces: every reduce-scatter, in issue order.
        compute_time: the sum of all compute: the step if nothing were exposed.
    """

    compute: list[Span]
    gathers: list[Span]
    reduces: list[Span]
    compute_time: float

    @property
    def step(self) -> float:
        """From the first all-gather to the last collective or compute."""
        return max(s.end for s in [*self.compute, *self.gathers, *self.reduces])

    @property
    def exposed(self) -> float:
        """Communication the compute stream waited for: ``step - compute_time``."""
        return self.step - self.compute_time


def _check_costs(costs: UnitCosts) -> int:
    lists = [costs.forward, costs.backward, costs.gather, costs.reduce]
    n = len(costs.forward)
    if n == 0 or any(len(v) != n for v in lists):
        raise ValueError(f"costs: four lists of one time per unit, got lengths {lists}")
    if any(not x >= 0 for v in lists for x in v):
        raise ValueError("costs: every time must be >= 0")
    return n


def simulate_zero3(
    costs: UnitCosts, prefetch: int = 0, reshard_after_forward: bool = True
) -> Zero3Timeline:
    """Replay one ZeRO-3 step (forward, backward, reductions) on two streams.

    Args:
        costs: per-unit times, seconds.
        prefetch: all-gathers started ahead, as in
            :class:`~aiinfra.parallel.zero.stage3.Zero3` (0: every collective blocks
            compute).
        reshard_after_forward: free parameters after forward (gather again).

    Raises:
        ValueError: ``prefetch`` not an int >= 0, or ``costs`` of unequal lengths
            or with a negative time.
    """
    checks.non_negative_int("prefetch", prefetch)
    n = _check_costs(costs)
    t, link_free, reducing = 0.0, 0.0, 0.0  # compute clock, comm stream, last RS
    gathered, in_flight = [False] * n, {}  # unit -> end of its all-gather
    compute, gathers, reduces = [], [], []

    def issue(spans: list[Span], unit: int, duration: float) -> float:
        nonlocal link_free
        start = max(t, link_free)  # issued now, runs when the stream is free
        link_free = start + duration
        spans.append(Span(unit, start, link_free))
        return link_free

    def gather(i: int, direction: int) -> None:
        nonlocal t
        if i in in_flight:
            t = max(t, in_flight.pop(i))  # wait for the prefetched all-gather
        elif not gathered[i]:
            t = issue(gathers, i, costs.gather[i])  # blocking all-gather
        gathered[i] = True
        for j in range(i + direction, i + direction * (prefetch + 1), direction):
            if not 0 <= j < n or len(in_flight) >= prefetch:
                break
            if j not in in_flight and not gathered[j]:
                in_flight[j] = issue(gathers, j, costs.gather[j])
                gathered[j] = True

    for i in range(n):
        gather(i, 1)
        compute.append(Span(i, t, t + costs.forward[i]))
        t += costs.forward[i]
        gathered[i] = not reshard_after_forward
    for i in reversed(range(n)):
        gather(i, -1)
        compute.append(Span(i, t, t + costs.backward[i]))
        t += costs.backward[i]
        if prefetch:  # asynchronous, one in flight: wait for the previous one
            t = max(t, reducing)
            reducing = issue(reduces, i, costs.reduce[i])
        else:
            t = issue(reduces, i, costs.reduce[i])
        gathered[i] = False
    total = sum(costs.forward) + sum(costs.backward)
    return Zero3Timeline(compute, gathers, reduces, total)


def layer_costs(
    model: str = "llama-3-8b",
    tokens: int = 16384,
    n_ranks: int = 64,
    link: str = "nic400",
    gpu: str = "H100",
) -> UnitCosts:
    """Per-layer times of a preset transformer: one unit per layer.

    The embedding and the output head are left out (the layers hold most of the
    parameters and nearly all the FLOPs).

    Args:
        model: a preset name (:func:`~aiinfra.models.presets.preset`).
        tokens: tau, tokens per GPU per step.
        n_ranks: p = N_d, ranks of the ring collectives.
        link: a key of :data:`~aiinfra.parallel.data.overlap.H100_LINKS` (its
            bandwidth per direction and latency).
        gpu: a key of :data:`~aiinfra.accelerators.GPUS` (its dense BF16 peak).

    Raises:
        ValueError: ``tokens`` < 1, ``n_ranks`` < 2, or an unknown key.
    """
    checks.positive_int("tokens", tokens)
    _check_keys(n_ranks, link, gpu)
    c = preset(model)
    psi_u = layer_parameters(model)
    forward = 2 * psi_u * tokens / GPUS[gpu].bf16_flops  # seconds
    w = H100_LINKS[link]
    net = LinkModel(alpha=w.alpha, beta=1 / w.bandwidth, gamma=LINKS["ib400"].gamma)
    n_bytes = 2 * psi_u  # bf16 parameters or gradients of one layer
    gather = ring_all_gather_time(n_bytes, n_ranks, net)
    reduce = ring_reduce_scatter_time(n_bytes, n_ranks, net)
    layers = c.n_layers
    return UnitCosts(
        [forward] * layers, [2 * forward] * layers, [gather] * layers, [reduce] * layers
    )


def forward_overlap_tokens(
    n_ranks: int = 64, link: str = "nic400", gpu: str = "H100"
) -> float:
    """tau*: tokens per GPU per micro-batch at which a unit's gather hides in forward.

    Forward computes 2 Psi_u tau FLOPs at F while the ring all-gathers the 2 Psi_u
    bytes of the next unit, (p - 1) / p of them at beta seconds per byte: Psi_u
    cancels and tau* = (p - 1) / p F beta (latency left out). Backward doubles both
    compute and traffic (gather and reduce-scatter), so the same tau* holds there.

    Raises:
        ValueError: ``n_ranks`` < 2, or an unknown key.
    """
    _check_keys(n_ranks, link, gpu)
    return (n_ranks - 1) / n_ranks * GPUS[gpu].bf16_flops / H100_LINKS[link].bandwidth


def _check_keys(n_ranks: int, link: str, gpu: str) -> None:
    checks.integer("n_ranks", n_ranks, low=2)
    for name, value, table in (("link", link, H100_LINKS), ("gpu", gpu, GPUS)):
        if value not in table:
            raise ValueError(f"{name} must be one of {sorted(table)}, got {value!r}")


def layer_parameters(model: str = "llama-3-8b") -> float:
    """Psi_u: parameters of one layer of a preset, its two norms included.

    Raises:
        KeyError: an unknown preset.
    """
    c = preset(model)
    count = count_parameters(c)
    final_norm = norm_parameters(c, c.d_model)
    return (count.attention + count.mlp + count.norms - final_norm) / c.n_layers


VARIANTS: dict[str, tuple[int, bool]] = {  # title -> (prefetch, reshard after fwd)
    "synchronous": (0, True),
    "prefetch one unit ahead": (1, True),
    "prefetch, no reshard after forward": (1, False),
}


def variant_timelines(costs: UnitCosts) -> dict[str, Zero3Timeline]:
    """:func:`simulate_zero3` for each of :data:`VARIANTS`."""
    return {
        name: simulate_zero3(costs, prefetch, reshard)
        for name, (prefetch, reshard) in VARIANTS.items()
    }


COLOURS = {"compute": "#1f77b4", "all-gather": "#ff7f0e", "reduce-scatter": "#2ca02c"}


def draw_timeline(ax: Axes, title: str, timeline: Zero3Timeline, fs: float) -> None:
    """One variant: a compute lane and a communication lane, times in ms.

    Raises:
        ValueError: ``fs`` is not a positive font size.
    """
    if not fs > 0:
        raise ValueError(f"fs must be > 0, got {fs!r}")
    ms = 1e3
    lanes = [
        (1, timeline.compute, "compute"),
        (0, timeline.gathers, "all-gather"),
        (0, timeline.reduces, "reduce-scatter"),
    ]
    for y, spans, kind in lanes:
        bars = [(s.start * ms, (s.end - s.start) * ms) for s in spans]
        ax.broken_barh(
            bars,
            (y - 0.35, 0.7),
            facecolors=COLOURS[kind],
            edgecolors="white",
            linewidth=0.2,
            gid=kind,
        )
    end, busy = timeline.step * ms, timeline.compute_time * ms
    ax.axvline(end, color="black", linestyle="--", linewidth=1.5)
    ax.axvline(busy, color="grey", linestyle=":", linewidth=1.5)
    ax.annotate("", (busy, 1.6), (end, 1.6), arrowprops={"arrowstyle": "<->"})
    ax.text(end + 8, 1.6, "exposed", va="center", fontsize=fs)
    ax.text(end + 8, 1.1, f"{timeline.exposed * ms:.0f} ms", va="center", fontsize=fs)
    ax.set_title(title, loc="left", fontsize=fs + 1)
    ax.set_ylim(-0.6, 2.0)
    ax.set_yticks([0, 1], ["communication", "compute"], fontsize=fs)
    ax.tick_params(axis="x", labelsize=fs)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def timeline_figure(costs: UnitCosts, fs: float = 8) -> Figure:
    """The three :data:`VARIANTS` on one time axis, one panel each."""
    timelines = variant_timelines(costs)
    fig = Figure(figsize=(7, 4.6), layout="constrained")
    axes = fig.subplots(len(timelines), 1, sharex=True)
    for ax, (title, timeline) in zip(axes, timelines.items(), strict=True):
        draw_timeline(ax, title, timeline, fs)
    longest = max(t.step for t in timelines.values()) * 1e3
    axes[-1].set_xlim(0, longest * 1.18)
    axes[-1].set_xlabel("time (ms)", fontsize=fs)
    handles = [Patch(facecolor=c, label=k) for k, c in COLOURS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=fs)
    return fig
