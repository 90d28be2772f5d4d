"""The expert-parallelism page's figures and tables, drawn from real routings.

The dispatch figure and the byte table route random tokens through a
:class:`~aiinfra.models.moe.layer.MoELayer` and split the assignments with
:func:`~aiinfra.models.expert_parallel.comm.dispatch_plan`, the code the
distributed layer runs; the spawned tests check that the layer's collectives send
exactly those rows. The time figure and the node table are cost models
(:mod:`aiinfra.models.expert_parallel.cost`).
"""

from __future__ import annotations

from dataclasses import replace

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from aiinfra.models.expert_parallel.comm import dispatch_plan, expert_owner
from aiinfra.models.expert_parallel.cost import (
    dispatch_bytes,
    ep_all_to_all_time,
    nodes_reached,
)
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.spec import MoESpec
from aiinfra.report import Table

RANK_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def routed_ranks(
    spec: MoESpec, d_model: int, tokens: int, ep_size: int, seed: int = 0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each rank's routing ``(experts, kept)`` of ``tokens`` random tokens.

    The layer's weights and the tokens are drawn from ``torch.Generator``s seeded
    with ``seed`` (the global generator is left alone).

    Returns:
        ``p`` pairs of ``(T, K)`` tensors.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):  # only the router runs
        layer = MoELayer(d_model, spec)
    layer.router.weight = torch.nn.Parameter(
        torch.randn(spec.n_experts, d_model, generator=g) / d_model**0.5
    )
    layer.expert_bias = torch.zeros(spec.n_experts)
    out = []
    with torch.no_grad():
        for _ in range(ep_size):
            r = layer.route(torch.randn(tokens, d_model, generator=g))
            out.append((r.experts, r.kept))
    return out


def bytes_table(
    spec: MoESpec,
    d_model: int,
    tokens: int,
    ep_size: int,
    element_bytes: int = 2,
) -> Table:
    """Rows and bytes each rank sends per all-to-all, against ``T K (p-1)/p h w``.

    Args:
        spec: the layer's routing.
        d_model: ``h``.
        tokens: ``T`` per rank.
        ep_size: ``p``.
        element_bytes: ``w``.

    Returns:
        One row per rank: assignments, rows sent in the dispatch (remote ones),
        rows sent back in the combine (those it served), their bytes, and the
        uniform-routing expectation.
    """
    routings = routed_ranks(spec, d_model, tokens, ep_size)
    E = spec.n_experts
    owners = [expert_owner(e, E, ep_size)[k] for e, k in routings]  # kept only
    expected = dispatch_bytes(tokens, spec.top_k, d_model, ep_size, element_bytes)
    rows = []
    for r, (experts, kept) in enumerate(routings):
        plan = dispatch_plan(experts, kept, E, ep_size)
        out = sum(plan.send) - plan.send[r]
        served = sum(int((o == r).sum()) for j, o in enumerate(owners) if j != r)
        row_bytes = d_model * element_bytes
        rows.append(
            [r, len(plan.order), out, served, out * row_bytes, served * row_bytes]
        )
        rows[-1].append(round(expected))
    return Table(
        ["rank", "assignments", "rows out", "rows back", "dispatch B", "combine B"]
        + ["uniform B"],
        rows,
        note="Rows out: this rank's assignments whose expert is on another rank "
        "(sent by the dispatch); rows back: the other ranks' assignments its "
        "experts served (sent by the combine). B: bytes; uniform: T K (p-1)/p h w.",
        stamp=f"E = {E}, K = {spec.top_k}, p = {ep_size}, T = {tokens}, "
        f"h = {d_model}, w = {element_bytes}",
    )


def _box(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    color: str,
    width: float = 0.9,
    fontsize: float = 7,
    gid: str | None = None,
) -> None:
    ax.add_patch(
        Rectangle(
            (x, y), width, 0.8, facecolor=color, alpha=0.3, edgecolor=color, gid=gid
        )
    )
    ax.text(x + width / 2, y + 0.4, text, ha="center", va="center", fontsize=fontsize)


DISPATCH_STEPS = ("1. permute by expert", "2. dispatch: all-to-all", "3. combine")


def dispatch_routings(tokens: int = 4, seed: int = 3) -> list[tuple[Tensor, Tensor]]:
    """The routing the dispatch figure draws: E = 4, K = 2, 2 ranks, h = 8."""
    return routed_ranks(MoESpec(n_experts=4, top_k=2, d_expert=1), 8, tokens, 2, seed)


def draw_dispatch(
    ax: Axes,
    routings: list[tuple[Tensor, Tensor]],
    steps: int = len(DISPATCH_STEPS),
    fontsize: float = 7,
) -> None:
    """The first ``steps`` steps of dispatch and combine for a routing on 2 ranks.

    ``E = 4`` experts (2 per rank), ``K = 2``: each rank's assignments sorted by
    expert (coloured by the rank that holds it), the rows each rank holds after the
    dispatch, grouped by expert (coloured by the rank they came from), and the
    experts each token's output sums after the combine. Each box's ``gid`` names
    what it holds (``permute:rank:token:expert``, ``received:rank:token:expert``,
    ``combine:rank:token``) for the tests.
    """
    p, tokens = len(routings), routings[0][0].shape[0]
    ax.set_xlim(-0.6, 11.4)
    ax.set_ylim(-0.5, 2 * tokens * 1.0 + 1.6)
    ax.axis("off")
    for c, title in enumerate(DISPATCH_STEPS[:steps]):
        ax.text(c * 4 + 1.4, 2 * tokens + 1.2, title, ha="center", fontsize=fontsize)
    received: dict[int, list[tuple[int, int, int]]] = {r: [] for r in range(p)}
    for r, (experts, kept) in enumerate(routings):
        plan = dispatch_plan(experts, kept, 4, p)
        top = (1 - r) * (tokens + 0.3) + tokens - 1 + 0.3
        ax.text(
            -0.55, top - tokens / 2 + 1, f"rank {r}", rotation=90, fontsize=fontsize
        )
        for i, (t, slot) in enumerate(zip(plan.tokens, plan.order, strict=True)):
            e, t = int(experts.flatten()[slot]), r * tokens + int(t)
            received[e // 2].append((e, t, r))
            if steps >= 1:
                col, row = divmod(i, tokens)
                _box(
                    ax,
                    col * 1.0,
                    top - row,
                    f"t{t}→E{e}",
                    RANK_COLORS[e // 2],
                    fontsize=fontsize,
                    gid=f"permute:{r}:{t}:{e}",
                )
        if steps >= 1:
            ax.text(2.7, top - tokens / 2 + 0.8, f"{plan.send}", fontsize=fontsize)
        for t in range(tokens if steps >= 3 else 0):
            chosen = ",".join(f"E{int(e)}" for e in experts[t].sort().values)
            _box(
                ax,
                9.0,
                top - t,
                f"t{r * tokens + t}: {chosen}",
                RANK_COLORS[r],
                1.8,
                fontsize,
                gid=f"combine:{r}:{r * tokens + t}",
            )
    for r in range(p if steps >= 2 else 0):
        top = (1 - r) * (tokens + 0.3) + tokens - 1 + 0.3
        for i, (e, t, src) in enumerate(sorted(received[r])):
            col, row = divmod(i, tokens)
            _box(
                ax,
                4.0 + col * 1.0,
                top - row,
                f"t{t}→E{e}",
                RANK_COLORS[src],
                fontsize=fontsize,
                gid=f"received:{r}:{t}:{e}",
            )


def dispatch_figure(tokens: int = 4, seed: int = 3) -> Figure:
    """Dispatch and combine, step by step, for a real routing on 2 ranks.

    The three steps of :func:`draw_dispatch` side by side.
    """
    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    draw_dispatch(fig.add_subplot(), dispatch_routings(tokens, seed))
    return fig


def all_to_all_time_figure(
    tokens: int = 4096, top_k: int = 8, d_model: int = 7168, element_bytes: int = 1
) -> Figure:
    """Modelled time of one dispatch against the expert-parallel size ``p``.

    Each rank sends ``T K h w`` bytes spread evenly over the ``p`` ranks (its own
    share stays): over NVLink alone (one NVLink domain), or with 8 GPUs per node
    and the rest over a 400 Gb/s NIC per GPU.
    """
    n = tokens * top_k * d_model * element_bytes
    sizes = [2, 4, 8, 16, 32, 64, 128]
    fig = Figure(figsize=(5.6, 3.0), layout="constrained")
    ax = fig.add_subplot()
    for label, local in (
        ("8 GPUs per node, IB between", 8),
        ("one NVLink domain", 128),
    ):
        t = [ep_all_to_all_time(n, p, local_size=min(local, p)) * 1e3 for p in sizes]
        ax.plot(sizes, t, marker="o", label=label)
    ax.axvline(8, color="0.6", linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(p) for p in sizes])
    ax.set_xlabel("expert-parallel size p")
    ax.set_ylabel("ms per dispatch (model)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return fig


def node_limit_table(spec: MoESpec, n_nodes: int, tokens: int = 2048) -> Table:
    """Copies of a token that cross nodes, with and without DeepSeek-V3's limit.

    Args:
        spec: the routing; its ``n_groups`` must equal ``n_nodes``.
        n_nodes: ``N``.
        tokens: tokens simulated per row.
    """
    rows = []
    for limit in (n_nodes, spec.topk_groups):
        found = nodes_reached(
            replace(spec, topk_groups=limit),
            n_nodes,
            tokens,
            torch.Generator().manual_seed(0),
        )
        rows.append(
            [
                "none" if limit == n_nodes else f"M = {limit}",
                round(found["nodes"], 2),
                found["max nodes"],
                round(found["remote experts"], 2),
                round(found["remote nodes"], 2),
            ]
        )
    return Table(
        ["node limit", "nodes", "most nodes", "copies per expert", "copies per node"],
        rows,
        note="Per token, simulated with random router scores: the nodes its experts "
        "live on (mean, and the most over the tokens), and the copies that leave its "
        "node when one is sent per remote expert or one per remote node.",
        stamp="E = {experts}, K = {top_k}, N = {nodes}, {tokens} tokens",
        fields={
            "experts": spec.n_experts,
            "top_k": spec.top_k,
            "nodes": n_nodes,
            "tokens": tokens,
        },
    )


def mesh_figure(n_experts: int = 8) -> Figure:
    """Expert and data parallelism on a 2 x 2 mesh: who holds what, who reduces.

    Rank ``(d, e) = 2 d + e``: row ``d`` of the mesh is an expert-parallel group
    (the all-to-all runs along it), column ``e`` a data-parallel group holding the
    same experts.
    """
    per_rank = n_experts // 2
    fig = Figure(figsize=(5.6, 2.9), layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(-1.4, 4.6)
    ax.set_ylim(-0.9, 3.3)
    ax.axis("off")
    for d in range(2):
        for e in range(2):
            x, y = e * 2.3, (1 - d) * 1.6
            first = e * per_rank
            ax.add_patch(
                Rectangle((x, y), 1.9, 1.2, facecolor=RANK_COLORS[e], alpha=0.25)
            )
            text = f"rank {2 * d + e}\nE{first}-E{first + per_rank - 1}\nrouter, shared"
            ax.text(x + 0.95, y + 0.6, text, ha="center", va="center", fontsize=8)
        ax.annotate(
            "",
            (2.3, (1 - d) * 1.6 + 0.6),
            (1.9, (1 - d) * 1.6 + 0.6),
            arrowprops={"arrowstyle": "<->"},
        )
        ax.text(-1.35, (1 - d) * 1.6 + 0.5, f"EP group {d}", fontsize=8)
    for e in range(2):
        ax.annotate(
            "",
            (e * 2.3 + 0.95, 1.2),
            (e * 2.3 + 0.95, 1.6),
            arrowprops={"arrowstyle": "<->", "color": "0.4"},
        )
    ax.text(
        1.05,
        -0.6,
        "rows: all-to-all and router sums; columns: every gradient summed",
        ha="center",
        fontsize=8,
    )
    return fig
