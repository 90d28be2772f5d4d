"""What ``docs/inference/speculative.rst`` shows: its values, tables and figures.

The acceptance rule runs at build time on a toy target ``p`` and draft ``q`` over
five tokens (20 000 rows at once, well under a second); the speed-up model is
Leviathan et al.'s formula; the GPU figure is a roofline model from the datasheet
(:mod:`aiinfra.hardware`); the CPU measurements are read from the stamped
``docs/_data/bench/speculative-cpu.json`` (:mod:`aiinfra.infer.speculative.bench`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer.speculative.decoding import (
    acceptance_rate,
    expected_tokens_per_call,
    residual_distribution,
    verify,
)
from aiinfra.infer.step_cost import decode_step, fused_step, roof_time
from aiinfra.models.kv_budget import kv_budget
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.results import run_on

SPEC_P = (0.4, 0.3, 0.1, 0.1, 0.1)  # the tests' toy laws: sum min(p, q) = 0.6
SPEC_Q = (0.1, 0.2, 0.3, 0.2, 0.2)
SPEC_ROWS = 20_000  # independent rounds simulated at once
SPEC_K = 3  # drafted tokens per round in the simulation
SPEC_SIM_KS = (1, 3, 6)  # simulated points of the tokens-per-call figure
SPEC_ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)  # curves of the tokens-per-call figure
SPEC_COSTS = (0.05, 0.2, 0.5)  # cost ratios c of the speed-up figure
SPEC_MODEL_ALPHA = 0.8  # alpha of the speed-up figure's model curves
SPEC_GPU_MODEL = "llama-3-8b"  # the target of the GPU roofline figure
SPEC_VERIFY_K = 4  # drafted tokens of the verification-cost figure
SPEC_SHORT, SPEC_LONG = 256, 2048  # cached tokens the prose compares
SPEC_CONTEXTS = (SPEC_SHORT, SPEC_LONG, 8192)  # cached tokens, the figure's lines
SPEC_BIG_BATCH = 256  # sequences per step of the prose's compute-bound example
SPEC_BATCHES = tuple(2**i for i in range(11))  # sequences per step: 1 ... 1024


def _laws() -> tuple[torch.Tensor, torch.Tensor]:
    p = torch.tensor(SPEC_P, dtype=torch.float64)
    return p, torch.tensor(SPEC_Q, dtype=torch.float64)


def spec_alpha() -> float:
    """``alpha = sum min(p, q)`` of the toy laws."""
    return float(acceptance_rate(*_laws()))


@functools.cache
def _simulated(k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Drafts, emitted tokens and counts of ``SPEC_ROWS`` rounds on the toy laws."""
    p, q = _laws()
    g = torch.Generator().manual_seed(1)
    qs = q[None, None].expand(SPEC_ROWS, k, 5)  # (n, k, V)
    drafts = torch.multinomial(qs.reshape(-1, 5), 1, generator=g).reshape(-1, k)
    tokens, count = verify(p[None, None].expand(SPEC_ROWS, k + 1, 5), qs, drafts, g)
    return drafts, tokens, count


def spec_simulated_tokens_per_call(k: int = SPEC_K) -> float:
    """Mean tokens per round over the simulated rounds of the toy laws."""
    return float(_simulated(k)[2].double().mean())


def spec_expected_tokens(alpha: float, k: int) -> float:
    """Leviathan et al.'s ``(1 - alpha^(k+1)) / (1 - alpha)``."""
    return expected_tokens_per_call(alpha, k)


def _speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al.'s wall-clock improvement ``E(alpha, k) / (k c + 1)``."""
    return expected_tokens_per_call(alpha, k) / (k * c + 1)


def spec_rule_figure() -> Figure:
    """The toy laws, the accepted mass, the residual, and what the rule emits."""
    p, q = _laws()
    _, tokens, _ = _simulated(SPEC_K)
    freq = torch.bincount(tokens[:, 0], minlength=5).double() / SPEC_ROWS
    idx = torch.arange(5)
    fig = Figure(figsize=(7.5, 2.6), layout="constrained")
    a, b, c = fig.subplots(1, 3, sharey=True)
    a.bar(idx - 0.2, p, 0.4, color="C0", label="target p")
    a.bar(idx + 0.2, q, 0.4, color="C1", label="draft q")
    a.set_title("the two laws", fontsize=9)
    a.set_ylabel("probability")
    a.legend(fontsize=7)
    b.bar(idx, torch.minimum(p, q), color="0.6", label="min(p, q): accepted")
    excess, residual = (p - q).clamp(min=0), residual_distribution(p, q)
    b.bar(idx, excess, bottom=torch.minimum(p, q), color="C3", label="max(0, p - q)")
    b.plot(idx, residual, "D", color="C3", mfc="none", label="residual, normalised")
    b.set_title(f"accepted mass alpha = {spec_alpha():.2f}", fontsize=9)
    b.legend(fontsize=7)
    c.bar(idx - 0.2, p, 0.4, color="C0", label="target p")
    c.bar(idx + 0.2, freq, 0.4, color="C2", label="emitted (simulated)")
    c.set_title("first emitted token", fontsize=9)
    c.legend(fontsize=7)
    for ax in (a, b, c):
        ax.set_xticks(idx)
        ax.set_xlabel("token")
    return fig


def spec_chi2() -> float:
    """Chi-square of the simulated first emitted tokens against ``p`` (4 d.o.f.)."""
    p, _ = _laws()
    counts = torch.bincount(_simulated(SPEC_K)[1][:, 0], minlength=5).double()
    return float(((counts - SPEC_ROWS * p) ** 2 / (SPEC_ROWS * p)).sum())


def spec_chi2_quantile(level: float = 0.999, df: int = len(SPEC_P) - 1) -> float:
    """The ``level`` quantile of the chi-square law on ``df`` degrees of freedom.

    Bisection on its CDF ``P(df / 2, x / 2)`` (the regularised lower incomplete
    gamma function), to a relative ``1e-12``.
    """

    def cdf(x: float) -> float:
        half = torch.tensor([df / 2, x / 2], dtype=torch.float64)
        return float(torch.special.gammainc(half[0], half[1]))

    lo, hi = 0.0, float(df)
    while cdf(hi) < level:
        lo, hi = hi, 2 * hi
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < level else (lo, mid)
    return (lo + hi) / 2


def _measured() -> list[dict]:
    """Per ``k``: alpha, tokens per call, speed-up measured and modelled."""
    res = results.load("speculative", "cpu")
    step = res["baseline"]["seconds"] / res["baseline"]["tokens"]  # plain decoding
    return [
        {
            "k": r["k"],
            "alpha": r["alpha"],
            "accepted": r["accepted"] / r["drafted"],
            "per_call": r["emitted"] / r["calls"],
            "formula": expected_tokens_per_call(r["alpha"], r["k"]),
            "speedup": res["baseline"]["seconds"] / r["seconds"],
            "model": _speedup(r["alpha"], r["k"], spec_cost_ratio()),
            "round": r["seconds"] / r["calls"] / step,  # in plain decode steps
        }
        for r in res["rows"]
    ]


def _column(name: str) -> list:
    """One column of the measured rows, in the order of ``k``."""
    return [r[name] for r in _measured()]


def spec_cost_ratio() -> float:
    """The measured ``c``: the draft's forward pass over the target's (one token)."""
    f = results.load("speculative", "cpu")["forward_ms"]
    return f["draft_1"] / f["target_1"]


def spec_measured(k: int, column: str) -> float:
    """One measured value at ``k``: ``alpha``, ``per_call``, ``speedup``, ...

    Raises:
        ValueError: no row at ``k``.
    """
    for row in _measured():
        if row["k"] == k:
            return row[column]
    raise ValueError(f"no measured row at k = {k}")


def spec_effective_cost(k: int) -> float:
    """The ``c`` that makes a round cost what it measured: ``(round - 1) / k``."""
    return (spec_measured(k, "round") - 1) / k


def spec_bench_load() -> float:
    """The machine's load (1 min) when the CPU measurement was stamped."""
    return results.load("speculative", "cpu")["stamp"]["load_1min"]


def spec_best_k() -> int:
    """The ``k`` of the largest measured speed-up."""
    return max(_measured(), key=lambda r: r["speedup"])["k"]


def spec_bench_table() -> Table:
    """The stamped CPU measurements, with the formula and the model beside them."""
    digits = {"alpha": 3, "accepted": 3}  # the others: 2
    rows = [[round(v, digits.get(n, 2)) for n, v in r.items()] for r in _measured()]
    res = results.load("speculative", "cpu")
    st, cfg, f = res["stamp"], res["config"], res["forward_ms"]
    on, fields = run_on(st)
    stamp = (
        "target h = {tw}, L = {tl}; draft h = {dw}, L = {dl}; V = {vocab}; forward "
        "{tms} ms and {dms} ms (c = {c}); {repeats} x {prompts} prompts of {new} "
        "tokens, T = {temperature}; {threads} thread on " + on
    )
    fields |= {
        "tw": cfg["target_width"],
        "tl": cfg["target_layers"],
        "dw": cfg["draft_width"],
        "dl": cfg["draft_layers"],
        "vocab": cfg["vocab"],
        "tms": f"{f['target_1']:.2f}",
        "dms": f"{f['draft_1']:.2f}",
        "c": f"{spec_cost_ratio():.2f}",
        "repeats": cfg["repeats"],
        "prompts": cfg["prompts"],
        "new": cfg["new_tokens"],
        "temperature": cfg["temperature"],
        "threads": st["threads"],
    }
    return Table(
        ["k", "alpha", "accepted / drafted", "tokens per call"]
        + ["formula", "speed-up", "model", "round cost"],
        rows,
        "Measured on the CPU; formula: (1 - alpha^(k+1)) / (1 - alpha) at the "
        "measured alpha; model: the formula divided by (k c + 1); round cost: "
        "the measured time of a round in plain decoding steps (the model: k c + 1).",
        stamp,
        fields=fields,
    )


def spec_tokens_figure() -> Figure:
    """Expected tokens per call against ``k``: formula, simulation, CPU run."""
    ks = list(range(1, 11))
    fig = Figure(figsize=(5.5, 3), layout="constrained")
    ax = fig.add_subplot()
    for alpha in SPEC_ALPHAS:
        ax.plot(
            ks,
            [expected_tokens_per_call(alpha, k) for k in ks],
            label=f"alpha = {alpha}",
        )
    sim = [spec_simulated_tokens_per_call(k) for k in SPEC_SIM_KS]
    ax.plot(SPEC_SIM_KS, sim, "kx", label="simulated, alpha = 0.6")
    cpu = "measured on the CPU"
    ax.plot(_column("k"), _column("per_call"), "ko", mfc="none", label=cpu)
    ax.set_xlabel("drafted tokens k")
    ax.set_ylabel("tokens per target call")
    ax.legend(fontsize=7, ncol=2)
    return fig


def spec_speedup_figure() -> Figure:
    """Leviathan et al.'s speed-up against ``k``, and the CPU measurement."""
    ks = list(range(1, 11))
    fig = Figure(figsize=(5.5, 3), layout="constrained")
    ax = fig.add_subplot()
    for c in SPEC_COSTS:
        ax.plot(
            ks,
            [_speedup(SPEC_MODEL_ALPHA, k, c) for k in ks],
            label=f"model, alpha = {SPEC_MODEL_ALPHA}, c = {c}",
        )
    label = "model at the run's alpha, forward-pass c"
    ax.plot(_column("k"), _column("model"), "k--", label=label)
    ax.plot(_column("k"), _column("speedup"), "ko", label="measured")
    ax.axhline(1, color="k", lw=0.5)
    ax.set_xlabel("drafted tokens k")
    ax.set_ylabel("speed-up over plain decoding")
    ax.legend(fontsize=7)
    return fig


def spec_gpu_step_ms(tokens: int, gpu: str = "H100") -> float:
    """Roofline time of one bf16 forward pass of ``tokens`` tokens, batch 1, ms.

    The step cost of every page (:func:`~aiinfra.infer.step_cost.fused_step`): every
    weight read once, ``2 Psi_mm`` FLOPs per token, the tokens attending causally
    to each other; no earlier context (a short prompt).
    """
    n = tokens
    step = fused_step(preset(SPEC_GPU_MODEL), n, n * (n + 1) // 2, n)
    return 1e3 * roof_time(step, GPUS[gpu])


def spec_gpu_ridge_tokens(gpu: str = "H100") -> float:
    """Tokens per forward pass at which the weights' matmuls become compute-bound."""
    return GPUS[gpu].ridge


def spec_gpu_figure() -> Figure:
    """Cost of a forward pass of ``n`` tokens over one token: H100 model, CPU run."""
    ns = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    one = spec_gpu_step_ms(1)
    ax.plot(
        ns,
        [spec_gpu_step_ms(n) / one for n in ns],
        "o-",
        label=f"H100, {SPEC_GPU_MODEL}, bf16 (roofline model)",
    )
    f = results.load("speculative", "cpu")["forward_ms"]
    cpu = sorted((int(key.split("_")[1]), v) for key, v in f.items() if "target" in key)
    ax.plot(
        [n for n, _ in cpu],
        [v / f["target_1"] for n, v in cpu],
        "s-",
        label="CPU, the bench's target (measured)",
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("tokens in one forward pass (k + 1)")
    ax.set_ylabel("time / one-token time")
    ax.legend(fontsize=7)
    return fig


def spec_verify_ratio(batch: int, context: int, k: int = SPEC_VERIFY_K) -> float:
    """Time of a step verifying ``k + 1`` tokens per sequence over a plain step.

    ``batch`` sequences of ``context`` cached tokens on an H100, Llama 3 8B, the
    roofline of :func:`~aiinfra.infer.step_cost.fused_step`: each sequence's cache
    is read once whatever the tokens verified; each of the ``k + 1`` tokens attends
    to the cache and to the tokens before it.
    """
    c, gpu, n = preset(SPEC_GPU_MODEL), GPUS["H100"], k + 1
    pairs = batch * (n * context + n * (n + 1) // 2)
    verify = fused_step(c, batch * n, pairs, batch * (context + n))
    return roof_time(verify, gpu) / roof_time(decode_step(c, batch, context), gpu)


def spec_max_batch(context: int) -> int:
    """Largest batch of :data:`SPEC_BATCHES` whose caches fit one H100.

    Next to the weights, at ``context`` cached tokens and ``k + 1`` more.
    """
    tokens = kv_budget(preset(SPEC_GPU_MODEL), GPUS["H100"]).tokens
    fits = [b for b in SPEC_BATCHES if b * (context + SPEC_VERIFY_K + 1) <= tokens]
    return max(fits)


def spec_verify_ratio_at_fit(context: int) -> float:
    """:func:`spec_verify_ratio` at the largest batch that fits, ``context``."""
    return spec_verify_ratio(spec_max_batch(context), context)


def spec_verify_figure() -> Figure:
    """Verification cost over a plain step against the batch, per context length."""
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for context, style in zip(SPEC_CONTEXTS, ("o-", "s--", "^:"), strict=True):
        bs = [b for b in SPEC_BATCHES if b <= spec_max_batch(context)]
        ax.plot(bs, [spec_verify_ratio(b, context) for b in bs], style, label=context)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequences per step")
    ax.set_ylabel("verify time / decode time")
    ax.legend(title="cached tokens", fontsize=7, title_fontsize=7)
    return fig


# One round, position by position

SPEC_ROUND_SEED = 10  # a seed whose round accepts two drafts and rejects the third


@dataclass(frozen=True)
class SpecRound:
    """One round of ``verify`` on the toy laws, with the coins it drew."""

    drafts: tuple[int, ...]  # x_1 .. x_k, drawn from q
    coins: tuple[float, ...]  # u_1 .. u_k, verify's first draw from the generator
    tokens: tuple[int, ...]  # what verify emitted
    accepted: int  # drafts kept


@functools.cache
def _spec_round() -> SpecRound:
    """The drawn round: ``SPEC_K`` drafts from ``q`` and ``verify``'s answer."""
    p, q = _laws()
    g = torch.Generator().manual_seed(SPEC_ROUND_SEED)
    qs = q[None, None].expand(1, SPEC_K, len(SPEC_Q))  # (1, k, V)
    drafts = torch.multinomial(qs[0], 1, generator=g).reshape(1, SPEC_K)  # (1, k)
    before = torch.Generator()
    before.set_state(g.get_state())  # verify's coins are its first draw from g
    coins = torch.rand(1, SPEC_K, generator=before, dtype=p.dtype)  # (1, k)
    ps = p[None, None].expand(1, SPEC_K + 1, len(SPEC_P))  # (1, k+1, V)
    tokens, n = verify(ps, qs, drafts, g)
    return SpecRound(
        tuple(drafts[0].tolist()),
        tuple(coins[0].tolist()),
        tuple(tokens[0, : int(n)].tolist()),
        int(n) - 1,
    )


def _draw_position(ax: Axes, i: int, fontsize: float) -> None:
    """Position ``i`` of the round: the laws, the draft, the coin, the verdict."""
    p, q = SPEC_P, SPEC_Q
    r = _spec_round()
    x, u = r.drafts[i], r.coins[i]
    idx = list(range(len(SPEC_P)))
    ax.bar([j - 0.2 for j in idx], p, 0.4, color="C0", label="target p")
    ax.bar([j + 0.2 for j in idx], q, 0.4, color="C1", label="draft q")
    ax.bar(x + 0.2, q[x], 0.4, fill=False, edgecolor="k", lw=2.5, label="drafted token")
    ax.plot(
        [x - 0.45, x + 0.45],
        [u * q[x]] * 2,
        color="k",
        ls="--",
        lw=2,
        label="coin u q(x)",
        gid=f"coin:{i}:{u * q[x]:.6f}",
    )
    accepted = i < r.accepted
    if not accepted:  # the replacement, from the residual
        res = residual_distribution(*_laws()).tolist()
        ax.plot(
            idx,
            res,
            "D",
            color="C3",
            mfc="none",
            markersize=fontsize * 0.7,
            label="residual, normalised",
        )
        y = r.tokens[i]
        ax.plot(
            y,
            res[y] + 0.06,
            "*",
            color="C3",
            markersize=fontsize * 1.2,
            label="replacement",
            gid=f"replacement:{i}:{y}",
        )
    ax.set_title(
        "accepted" if accepted else "rejected",
        fontsize=fontsize,
        color="C2" if accepted else "C3",
        gid=f"verdict:{i}:{int(accepted)}",
    )
    ax.set_xticks(idx)
    ax.set_ylim(0, 0.9)
    ax.set_xlabel("token", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)


def _round_axes(fig: Figure) -> list[Axes]:
    return list(fig.subplots(1, SPEC_K, sharey=True))


def _round_legend(fig: Figure, axes: list[Axes], fontsize: float) -> None:
    handles, labels = [], []
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles, labels = handles + [h], labels + [label]
    fig.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=3,
        fontsize=fontsize,
        frameon=False,
    )
    axes[0].set_ylabel("probability", fontsize=fontsize)


def spec_round_figure() -> Figure:
    """The drawn round's three positions: two drafts accepted, the third replaced."""
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    axes = _round_axes(fig)
    for i, ax in enumerate(axes):
        _draw_position(ax, i, 9)
    _round_legend(fig, axes, 8)
    return fig


def spec_round_frames() -> list[Figure]:
    """The same round checked one position at a time, at slide size."""
    frames = []
    for shown in range(1, SPEC_K + 1):
        fig = Figure(figsize=(10, 5), layout="constrained")
        axes = _round_axes(fig)
        for i, ax in enumerate(axes):
            if i < shown:
                _draw_position(ax, i, 14)
            else:
                ax.set_axis_off()
        _round_legend(fig, axes[:shown], 14)
        frames.append(fig)
    return frames


def spec_round_kept() -> int:
    """Drafts the drawn round keeps."""
    return _spec_round().accepted
