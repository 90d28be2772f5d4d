"""The MoE page's figures: a routing, group limits, capacity, shared experts, balancing.

Every figure is drawn from a real computation: the expert widths of the published
configurations (:mod:`~aiinfra.models.presets`), the routing of a
small :class:`~aiinfra.models.moe.layer.MoELayer` built from a fixed generator, the
training runs of :mod:`~aiinfra.models.moe.train`, and the stamped CPU timings of
:mod:`~aiinfra.models.moe.bench`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from aiinfra.models.moe.balance import expert_load
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.routing import Routing
from aiinfra.models.moe.spec import MoESpec
from aiinfra.models.presets import preset

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from aiinfra.models.moe.train import BalanceRun

MOE_MODELS = ("mixtral-8x7b", "qwen1.5-moe-a2.7b", "deepseek-v2", "deepseek-v3")
DEMO_H = 16  # h of the demonstration layers


def demo_layer(spec: MoESpec, seed: int = 0, router_gain: float = 4.0) -> MoELayer:
    """A small fp64 layer whose parameters come from ``torch.Generator(seed)``.

    Args:
        spec: its shape.
        seed: the generator's seed.
        router_gain: the router's rows are scaled by this over ``1/sqrt(h)``, so
            that routing is decisive as in a trained model.
    """
    g = torch.Generator().manual_seed(seed)
    layer = MoELayer(DEMO_H, spec).double()
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g, dtype=p.dtype) / p.shape[-1] ** 0.5
            )
        layer.router.weight.mul_(router_gain)
    return layer


def demo_tokens(T: int, seed: int = 1) -> torch.Tensor:
    """``T`` Gaussian tokens ``(T, h)`` in fp64 from ``torch.Generator(seed)``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(T, DEMO_H, generator=g, dtype=torch.float64)


def routing_figure(layer: MoELayer, x: torch.Tensor) -> Figure:
    """Router scores of a few tokens; chosen experts circled, dropped ones crossed."""
    from matplotlib.figure import Figure

    r = layer.route(x)
    fig = Figure(figsize=(6, 2.6), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(r.scores.detach().T, cmap="Blues", aspect="auto")
    fig.colorbar(image, ax=ax, label="score", shrink=0.9)
    t, k = torch.where(r.kept)
    ax.scatter(
        t, r.experts[t, k], s=60, facecolors="none", edgecolors="C1", label="chosen"
    )
    t, k = torch.where(~r.kept)
    if t.numel():
        ax.scatter(t, r.experts[t, k], s=50, marker="x", color="C3", label="dropped")
    ax.set_xlabel("token")
    ax.set_ylabel("expert")
    fig.legend(fontsize=7, loc="outside upper center", ncols=2)
    return fig


def group_figure(layer: MoELayer, x: torch.Tensor, token: int = 0) -> Figure:
    """One token's scores by group: kept groups, its choice and the free top-K."""
    from matplotlib.figure import Figure

    s, E = layer.spec, layer.spec.n_experts
    r = layer.route(x)
    score = (r.scores[token] + layer.expert_bias).detach()  # (E,)
    per_group = E // s.n_groups
    chosen = set(r.experts[token].tolist())
    free = set(score.topk(s.top_k).indices.tolist())
    kept_groups = {e // per_group for e in chosen}
    fig = Figure(figsize=(6, 2.6), layout="constrained")
    ax = fig.add_subplot()
    for grp in range(s.n_groups):
        if grp in kept_groups:
            lo = grp * per_group - 0.5
            ax.axvspan(lo, lo + per_group, color="0.92", zorder=0)
    colors = [f"C{e // per_group}" for e in range(E)]
    ax.bar(range(E), score, color=colors)
    for e in chosen:
        ax.annotate(
            "chosen", (e, float(score[e])), ha="center", va="bottom", fontsize=7
        )
    for e in free - chosen:
        ax.annotate(
            "top-K\nwithout limit",
            (e, float(score[e])),
            ha="center",
            va="bottom",
            color="C3",
            fontsize=7,
        )
    ax.set_ylim(0, 1.2 * float(score.max()))
    ax.set_xticks(range(E))
    ax.set_xlabel("expert (colour: group; grey band: a kept group)")
    ax.set_ylabel("score")
    return fig


def capacity_figure(routings: dict[float, Routing], n_experts: int) -> Figure:
    """Assignments per expert, kept and dropped, against ``C`` for each factor."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 2.6), layout="constrained")
    axes = fig.subplots(1, len(routings), sharey=True, squeeze=False)[0]
    for ax, (cf, r) in zip(axes, routings.items(), strict=True):
        T, K = r.experts.shape
        kept = expert_load(r.experts[r.kept], n_experts)
        dropped = expert_load(r.experts[~r.kept], n_experts)
        C = MoESpec(n_experts, K, 1, capacity_factor=cf).capacity(T)
        ax.bar(range(n_experts), kept, label="kept")
        ax.bar(
            range(n_experts),
            dropped,
            bottom=kept,
            color="C3",
            hatch="//",
            label="dropped",
        )
        ax.axhline(C, color="k", ls="--", lw=1)
        ax.annotate(f"C = {C}", (3.5, C + 0.3), ha="center", va="bottom", fontsize=7)
        ax.axhline(T * K / n_experts, color="0.5", ls=":", lw=1)
        ax.set_title(f"cf = {cf:g}", fontsize=9)
        ax.set_xticks(range(n_experts))
        ax.set_xlabel("expert")
    axes[0].set_ylabel("assignments")
    axes[0].legend(fontsize=7)
    return fig


def shared_figure(names: tuple[str, ...] = MOE_MODELS) -> Figure:
    """Expert parameters one token uses per MoE layer: shared and routed, millions."""
    from matplotlib.figure import Figure

    shared, routed = [], []
    for n in names:
        c = preset(n)
        spec = c.moe_spec()
        shared.append(3 * c.d_model * spec.shared_width / 1e6)
        routed.append(3 * c.d_model * spec.top_k * spec.d_expert / 1e6)
    fig = Figure(figsize=(6, 2.4), layout="constrained")
    ax = fig.add_subplot()
    y = range(len(names))
    ax.barh(y, shared, label="shared experts", color="C2")
    ax.barh(y, routed, left=shared, label="K routed experts", color="C0")
    ax.set_yticks(list(y), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("expert parameters per token and layer (millions)")
    fig.legend(fontsize=7, loc="outside upper center", ncols=2)
    return fig


def balance_figure(runs: list[BalanceRun], n_experts: int, top_k: int) -> Figure:
    """``max/mean`` load over the steps, and the last step's load, per method."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 2.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(3, 2))
    for i, run in enumerate(runs):
        left.plot(run.imbalance, label=run.method, color=f"C{i}")
        right.bar(
            [e + (i - 1) * 0.27 for e in range(n_experts)],
            run.load[-10:].double().mean(0),
            0.27,
            color=f"C{i}",
        )
    left.axhline(n_experts / top_k, color="0.5", ls=":", lw=1)
    left.axhline(1.0, color="k", ls="--", lw=1)
    left.set_xlabel("step")
    left.set_ylabel("max / mean load")
    left.legend(fontsize=7)
    right.set_xticks(range(n_experts))
    right.set_xlabel("expert")
    right.set_ylabel("tokens, last 10 steps")
    return fig


def bench_figure(res: dict) -> Figure:
    """Forward time against ``T`` per implementation, log-log (stamped timings)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    impls = dict.fromkeys(r["impl"] for r in res["rows"])
    for impl in impls:
        rows = [r for r in res["rows"] if r["impl"] == impl]
        ax.plot([r["tokens"] for r in rows], [r["ms"] for r in rows], "o-", label=impl)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens T")
    ax.set_ylabel("forward (ms)")
    ax.legend(fontsize=7)
    return fig
