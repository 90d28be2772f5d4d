"""What ``docs/inference/kv_eviction.rst`` shows: its values, figures and table.

The perplexities under each cache budget are read from the stamped result
``kv-eviction``, which ``aiinfra evict --stamp`` writes
(:func:`~aiinfra.infer.kv.streaming_eval.run_streaming_eval`; training takes
minutes). The routing replay is computed at build time (pure Python, well under a
second per run) and its saved prefill is timed with the book's one step cost, the
roofline of Llama 3 8B on one H100 (:mod:`aiinfra.infer.step_cost`).
"""

from __future__ import annotations

import functools
from typing import Any

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer.kv import streaming_eval
from aiinfra.infer.routing.simulate import ROUTERS, RoutingResult, make_router, simulate
from aiinfra.infer.routing.workload import ChatWorkload, chat_requests
from aiinfra.infer.step_cost import RooflineStepCost
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.results import measured_on

# Section 1: the measured cache budgets.
STREAMINGLLM_SINKS = 4  # Xiao et al. 2024: four initial tokens suffice (Sec. 3.2)


@functools.cache
def _evict() -> dict[str, Any]:
    """The stamped ``kv-eviction`` result of the CPU."""
    return results.load(streaming_eval.KIND, "cpu")


def _ppl(budget: int, sinks: int) -> float:
    rows = _evict()["rows"]
    return next(r["ppl"] for r in rows if (r["budget"], r["sinks"]) == (budget, sinks))


def ev_sinks() -> int:
    """Sink tokens of the measured window + sinks policy, ``S``."""
    return _evict()["config"]["sinks"]


def ev_lag() -> int:
    """Reach of the language's copy rule, tokens."""
    return _evict()["config"]["lag"]


def ev_p_copy() -> float:
    """Probability that a token repeats the one ``lag`` tokens back."""
    return _evict()["config"]["p_copy"]


def ev_seq_len() -> int:
    """Tokens per held-out sequence (the full cache's size)."""
    return _evict()["config"]["seq_len"]


def ev_model(field: str) -> int:
    """A size of the measured model, ``"n_layers"`` or ``"d_model"``."""
    model = _evict()["config"]["model"]
    if field not in ("n_layers", "d_model"):
        raise ValueError(f"field must be 'n_layers' or 'd_model', got {field!r}")
    return model[field]


def ev_steps() -> int:
    """Training steps of the measured model."""
    return _evict()["config"]["steps"]


def ev_full_ppl() -> float:
    """Held-out perplexity with the full cache."""
    return _evict()["full"]["ppl"]


def ev_floor_ppl() -> float:
    """The language's own perplexity on the held-out set (no model does better)."""
    return 2.718281828459045 ** _evict()["floor_nll"]


def ev_window_ppl(budget: int) -> float:
    """Held-out perplexity with a sliding window of ``budget`` tokens."""
    return _ppl(budget, 0)


def ev_sink_ppl(budget: int) -> float:
    """Held-out perplexity with ``S`` sinks and ``budget - S`` latest tokens."""
    return _ppl(budget, ev_sinks())


def ev_first_token_mass(layer: int) -> float:
    """Mean attention mass on token 0 in ``layer`` with the full cache, late queries."""
    return _evict()["first_token_mass"][layer]


def ev_uniform_mass() -> float:
    """The same queries' share for token 0 if attention were uniform, ``1/(t+1)``."""
    return _evict()["uniform_mass"]


def eviction_figure() -> Figure:
    """Held-out perplexity against the cache budget: window, window + sinks."""
    res = _evict()
    budgets = sorted({r["budget"] for r in res["rows"]})
    fig = Figure(figsize=(6.0, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(budgets, [ev_window_ppl(b) for b in budgets], "o-", label="sliding window")
    ax.plot(
        budgets,
        [ev_sink_ppl(b) for b in budgets],
        "s-",
        label="window and sink tokens",
    )
    ax.axhline(ev_full_ppl(), color="black", lw=0.8, label="full cache")
    ax.axhline(ev_floor_ppl(), color="black", ls=":", lw=1, label="floor")
    ax.axvline(ev_lag(), color="grey", ls="--", lw=0.8)
    ax.set_xlabel("cache budget (tokens)")
    ax.set_ylabel("held-out perplexity")
    ax.legend(fontsize=7)
    return fig


def eviction_table() -> Table:
    """Perplexity per budget, window and window + sinks, with the run's stamp."""
    res = _evict()
    budgets = sorted({r["budget"] for r in res["rows"]})
    rows = [[b, round(ev_window_ppl(b), 3), round(ev_sink_ppl(b), 3)] for b in budgets]
    st, c = res["stamp"], res["config"]
    on, fields = measured_on(st)
    stamp = on + "; V = {vocab}, h = {width}, L = {layers}, {steps} steps"
    fields |= {
        "vocab": c["model"]["vocab_size"],
        "width": c["model"]["d_model"],
        "layers": c["model"]["n_layers"],
        "steps": c["steps"],
    }
    columns = ["budget (tokens)", "sliding window", "window and sink tokens"]
    note = "Held-out perplexity of the model decoded token by token."
    return Table(columns, rows, note, stamp, words=(), fields=fields)


# Section 2: routing over replicas.
REPLICAS = (1, 2, 4, 8)  # R, the figure's x axis
SHOWN_REPLICAS = 4  # the table's and the prose's R
LOAD_BOUND = 2  # prefix-aware: running requests above the least loaded, at most
BLOCK, POOL_BLOCKS = 16, 512  # cache blocks of 16 tokens (vLLM's), per replica
MODEL, GPU = "llama-3-8b", "H100"


@functools.cache
def _routing(router: str, n_replicas: int) -> RoutingResult:
    """The book's chat workload replayed over ``n_replicas`` replicas."""
    reqs = chat_requests(ChatWorkload())
    return simulate(
        reqs, n_replicas, make_router(router, LOAD_BOUND), BLOCK, POOL_BLOCKS
    )


@functools.cache
def _prefill_seconds(router: str, n_replicas: int) -> float:
    """Roofline prefill time of every request, summed, seconds."""
    cost = RooflineStepCost(preset(MODEL), GPUS[GPU])
    res = _routing(router, n_replicas)
    return float(
        sum(cost([(n, c)], 0, 0) for n, c in zip(res.computed, res.cached, strict=True))
    )


def rt_workload(field: str) -> int:
    """A field of the book's chat workload (``sessions``, ``turns``, ...)."""
    return getattr(ChatWorkload(), field)


def rt_requests() -> int:
    """Requests in the book's chat workload."""
    return len(chat_requests(ChatWorkload()))


def rt_prompt_tokens() -> int:
    """Prompt tokens of the whole workload."""
    return sum(len(r.tokens) for r in chat_requests(ChatWorkload()))


def rt_hit_rate(router: str, n_replicas: int) -> float:
    """Share of prompt tokens found in the chosen replica's cache."""
    return _routing(router, n_replicas).hit_rate


def rt_prefill_seconds(router: str, n_replicas: int) -> float:
    """Prefill time of the workload on H100s (roofline of Llama 3 8B), seconds."""
    return _prefill_seconds(router, n_replicas)


def rt_speedup(n_replicas: int) -> float:
    """Round-robin's prefill time over prefix-aware routing's."""
    return _prefill_seconds("round-robin", n_replicas) / _prefill_seconds(
        "prefix-aware", n_replicas
    )


def rt_imbalance(router: str, n_replicas: int) -> float:
    """Requests on the busiest replica over the mean."""
    return _routing(router, n_replicas).imbalance


def routing_figure() -> Figure:
    """Hit rate and prefill time against the number of replicas, per router."""
    fig = Figure(figsize=(6.4, 2.8), layout="constrained")
    hit, time = fig.subplots(1, 2)
    for name, marker in zip(ROUTERS, "o^s", strict=True):
        hit.plot(
            REPLICAS,
            [rt_hit_rate(name, r) for r in REPLICAS],
            marker=marker,
            label=name,
        )
        time.plot(
            REPLICAS,
            [rt_prefill_seconds(name, r) for r in REPLICAS],
            marker=marker,
            label=name,
        )
    for ax in (hit, time):
        ax.set_xscale("log", base=2)
        ax.set_xticks(REPLICAS, [str(r) for r in REPLICAS])
        ax.set_xlabel("replicas")
    hit.set_ylabel("prefix cache hit rate")
    time.set_ylabel("prefill time (s)")
    hit.legend(fontsize=7)
    return fig


def routing_table() -> Table:
    """Each router at ``SHOWN_REPLICAS`` replicas: hits, prefill, balance."""
    R = SHOWN_REPLICAS
    rows = [
        [
            name,
            round(100 * rt_hit_rate(name, R), 1),
            sum(_routing(name, R).computed),
            round(rt_prefill_seconds(name, R), 3),
            round(rt_imbalance(name, R), 2),
        ]
        for name in ROUTERS
    ]
    columns = ["router", "hit rate (%)", "prefill tokens", "prefill (s)", "imbalance"]
    note = (
        "Prefill tokens: computed, not found in a cache; prefill time: the roofline "
        "of each request's prefill, Llama 3 8B on one H100; imbalance: requests on "
        "the busiest replica over the mean."
    )
    return Table(columns, rows, note, "R = {r}", fields={"r": R})
