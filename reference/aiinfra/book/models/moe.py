"""What ``docs/models/moe.rst`` shows: its values, tables, figures.

The demonstration layers are small (``h = 16``) and built from fixed generators;
the parameter counts are those of the published configurations; the balancing runs
are computed at build time (well under a second each); the timings are read from the
stamped ``docs/_data/bench/moe-cpu.json`` (``aiinfra bench moe``).
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.models.moe import bench as moe_bench
from aiinfra.models.moe import figures as moe_figures
from aiinfra.models.moe.balance import (
    BIAS_GAMMA,
    BIAS_GAMMA_TOKENS,
    SEQUENCE_ALPHA,
    SWITCH_ALPHA,
    Z_LOSS_WEIGHT,
)
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.routing import Routing
from aiinfra.models.moe.spec import MoESpec
from aiinfra.models.moe.train import (
    METHODS,
    BalanceRun,
    BalanceRunConfig,
    train_balance,
)
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

MOE_SWITCH_ALPHA = SWITCH_ALPHA  # the papers' settings
MOE_Z_LOSS_WEIGHT = Z_LOSS_WEIGHT
MOE_BIAS_GAMMA = BIAS_GAMMA
MOE_SEQUENCE_ALPHA = SEQUENCE_ALPHA
MOE_RUN = BalanceRunConfig()  # the balancing run of the figure
MOE_RUN_ALPHA, MOE_RUN_GAMMA, MOE_RUN_STEPS = (
    MOE_RUN.alpha,
    MOE_RUN.gamma,
    MOE_RUN.steps,
)
MOE_RUN_TOKENS = MOE_RUN.tokens
MOE_ROUTING_SPEC = MoESpec(8, 2, 8)  # the routing figure: Mixtral's shape, small
MOE_GROUP_SPEC = MoESpec(  # DeepSeek-V3's routing, small: 16 experts in 4 groups
    16, 4, 8, router="sigmoid", n_groups=4, topk_groups=2, group_score="top2"
)
MOE_GROUP_TOKENS = 256  # tokens routed to count how often the group limit binds
MOE_CAPACITY_TOKENS = 64  # T of the capacity example
MOE_CAPACITY_FACTORS = (0.5, 1.0, 1.25, 1.5, 2.0)
MOE_CAPACITY_FIGURE_FACTORS = (1.0, 1.25)


def moe_deepseek_v3_activated_percent() -> float:
    """DeepSeek-V3's activated parameters as a share of its total, percent."""
    c = preset("deepseek-v3")
    return 100 * count_parameters(c, activated=True).total / count_parameters(c).total


def moe_billions(name: str, activated: bool = False) -> float:
    """A preset's total (or activated) parameters, billions."""
    return count_parameters(preset(name), activated=activated).total / 1e9


def moe_bias_gamma_trillions() -> float:
    """Tokens of DeepSeek-V3's training with ``gamma = 0.001``, trillions (then 0)."""
    return BIAS_GAMMA_TOKENS / 1e12


def moe_spec_field(name: str, field: str) -> int | float | str | bool | None:
    """One routing field of a preset's ``MoESpec``, e.g. ``topk_groups``."""
    return getattr(preset(name).moe_spec(), field)


def _routing_layer() -> MoELayer:
    return moe_figures.demo_layer(MOE_ROUTING_SPEC)


def moe_routing_figure() -> Figure:
    """Softmax scores of 16 tokens over 8 experts, the top-2 circled."""
    return moe_figures.routing_figure(_routing_layer(), moe_figures.demo_tokens(16))


@functools.cache
def _group_routing() -> tuple[MoELayer, Routing, list[bool]]:
    layer = moe_figures.demo_layer(MOE_GROUP_SPEC)
    x = moe_figures.demo_tokens(MOE_GROUP_TOKENS)
    with torch.no_grad():
        r = layer.route(x)
    per_group = MOE_GROUP_SPEC.n_experts // MOE_GROUP_SPEC.n_groups
    free = r.scores.topk(MOE_GROUP_SPEC.top_k, dim=-1).indices // per_group  # (T, K)
    binds = [len(set(row.tolist())) > MOE_GROUP_SPEC.topk_groups for row in free]
    return layer, r, binds


def moe_group_limit_binds_percent() -> float:
    """Tokens of the example whose free top-K would span more than 2 groups, %."""
    binds = _group_routing()[2]
    return 100 * sum(binds) / len(binds)


def moe_group_score_kept_percent() -> float:
    """Mean share of the free top-K score sum the group-limited choice keeps, %."""
    _, r, _ = _group_routing()
    free = r.scores.topk(MOE_GROUP_SPEC.top_k, dim=-1).values.sum(-1)  # (T,)
    kept = r.scores.gather(1, r.experts).sum(-1)  # (T,)
    return 100 * float((kept / free).mean())


def moe_group_figure() -> Figure:
    """One token's scores by group, where the group limit changes its choice."""
    layer, _, binds = _group_routing()
    token = binds.index(True)
    return moe_figures.group_figure(
        layer, moe_figures.demo_tokens(MOE_GROUP_TOKENS)[: token + 1], token
    )


@functools.cache
def _capacity_routings() -> dict[float, Routing]:
    out = {}
    for cf in MOE_CAPACITY_FACTORS:
        spec = MoESpec(8, 2, 8, capacity_factor=cf)
        layer = moe_figures.demo_layer(spec, seed=2)
        with torch.no_grad():
            out[cf] = layer.route(moe_figures.demo_tokens(MOE_CAPACITY_TOKENS, seed=3))
    return out


def moe_capacity_figure() -> Figure:
    """Assignments per expert against the capacity, kept and dropped."""
    routings = _capacity_routings()
    return moe_figures.capacity_figure(
        {cf: routings[cf] for cf in MOE_CAPACITY_FIGURE_FACTORS}, 8
    )


def moe_dropped_percent(cf: float) -> float:
    """Assignments dropped in the capacity example at capacity factor ``cf``, %."""
    r = _capacity_routings()[cf]
    return 100 * float((~r.kept).double().mean())


def moe_capacity_table() -> Table:
    """Capacity, dropped assignments and tokens left with no expert, per factor."""
    rows = []
    for cf, r in _capacity_routings().items():
        C = MoESpec(8, 2, 8, capacity_factor=cf).capacity(MOE_CAPACITY_TOKENS)
        rows.append(
            [
                cf,
                C,
                round(moe_dropped_percent(cf), 1),
                int((~r.kept).all(-1).sum()),
                int((~r.kept).any(-1).sum()),
            ]
        )
    note = "One batch of the example layer (E = 8, K = 2); C = ceil(cf T K / E)."
    columns = ["cf", "C", "dropped (%)", "tokens with no expert", "tokens missing one"]
    return Table(columns, rows, note, f"T = {MOE_CAPACITY_TOKENS}")


def moe_shared_figure() -> Figure:
    """Expert parameters per token and layer: shared and routed."""
    return moe_figures.shared_figure()


@functools.cache
def _balance_runs() -> tuple[BalanceRun, ...]:
    return tuple(train_balance(method, MOE_RUN) for method in METHODS)


def moe_balance_figure() -> Figure:
    """Max/mean load over the steps of the skewed run, per balancing method."""
    return moe_figures.balance_figure(
        list(_balance_runs()), MOE_RUN.n_experts, MOE_RUN.top_k
    )


def moe_imbalance(method: str, when: str = "last") -> float:
    """Max/mean load of a method's run: at step 0 (``"first"``) or the last 10 steps.

    Raises:
        ValueError: an unknown method or ``when``.
    """
    if method not in METHODS or when not in ("first", "last"):
        raise ValueError(f"method must be one of {METHODS} and when first or last")
    ratio = _balance_runs()[METHODS.index(method)].imbalance
    return float(ratio[0] if when == "first" else ratio[-10:].mean())


def moe_balance_table() -> Table:
    """Imbalance at the start and the end, and the task loss, per method."""
    rows = [
        [
            run.method,
            round(moe_imbalance(run.method, "first"), 2),
            round(moe_imbalance(run.method), 2),
            round(float(run.task_loss[-10:].mean()), 3),
        ]
        for run in _balance_runs()
    ]
    note = (
        "Max/mean load at step 0 and over the last 10 steps; task loss (MSE), last 10."
    )
    stamp = (
        "h = {width}, E = {experts}, K = {top_k}, T = {tokens}, {steps} steps, "
        "alpha = {alpha}, gamma = {gamma}"
    )
    fields = {
        "width": MOE_RUN.d_model,
        "experts": MOE_RUN.n_experts,
        "top_k": MOE_RUN.top_k,
        "tokens": MOE_RUN.tokens,
        "steps": MOE_RUN.steps,
        "alpha": MOE_RUN.alpha,
        "gamma": MOE_RUN.gamma,
    }
    columns = ["method", "at step 0", "at the end", "task loss"]
    return Table(columns, rows, note, stamp, fields=fields)


def moe_bench_table() -> Table:
    """The stamped CPU timings of the three expert computations."""
    return replace(moe_bench.moe_bench_table(results.load("moe", "cpu")), words=(0, 1))


def moe_bench_figure() -> Figure:
    """The same timings against ``T``."""
    return moe_figures.bench_figure(results.load("moe", "cpu"))


def moe_grouped_speedup(over: str, tokens: int) -> float:
    """How many times faster the grouped computation ran than ``over`` at ``T``.

    Raises:
        ValueError: no such row in the stamped file.
    """
    ms = {(r["impl"], r["tokens"]): r["ms"] for r in results.load("moe", "cpu")["rows"]}
    if (over, tokens) not in ms or ("grouped", tokens) not in ms:
        raise ValueError(f"no timing of {over!r} and 'grouped' at T = {tokens}")
    return ms[(over, tokens)] / ms[("grouped", tokens)]
