"""What ``docs/inference/batching.rst`` shows: its values, figures and table.

Every number is simulated with the roofline step cost of Llama 3 8B on one H100
(:mod:`aiinfra.infer.step_cost`), not measured: a trace of Poisson arrivals is
replayed under static batching, continuous batching, chunked prefill and
prefill/decode disaggregation.
"""

from __future__ import annotations

from functools import cache

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from aiinfra.accelerators import GPUS
from aiinfra.infer.batching.disagg import (
    kv_transfer_time,
    simulate_colocated,
    simulate_disaggregated,
)
from aiinfra.infer.batching.simulator import simulate_continuous, simulate_static
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.infer.engine.steps import Iteration, trace_iterations
from aiinfra.infer.serve_cli import tiny_model
from aiinfra.infer.step_cost import RooflineStepCost
from aiinfra.infer.trace import Record, Request, latency_summary, poisson_trace
from aiinfra.models.kv_budget import kv_budget
from aiinfra.models.presets import preset
from aiinfra.plan.job import INTER_NODE, intra_node_link
from aiinfra.report import Table

MODEL, GPU = "llama-3-8b", "H100"
MAX_BATCH = 64  # requests running at once on one GPU (vLLM's default is 256)
TOKEN_BUDGET = 512  # chunked prefill: new tokens per step
N_REQUESTS, SEED = 200, 0  # the trace: requests, and the seed of its draws
PROMPT_MIN, PROMPT_MAX, OUTPUT_MIN, OUTPUT_MAX = 128, 2048, 16, 512  # tokens, uniform
PROMPT, OUTPUT = (PROMPT_MIN, PROMPT_MAX), (OUTPUT_MIN, OUTPUT_MAX)
RATES = (4, 8, 12, 16, 20, 24, 28, 32)  # requests per second, one GPU
LOW_RATE, TAIL_RATE = RATES[0], 28  # where the page compares TTFT and TPOT
CONTEXT = 1024  # cached tokens per sequence in the single-step examples
POLICIES = ("static", "continuous", "chunked")
# Disaggregation: a prefill-heavy trace (long prompts, short answers) on four GPUs
DISAGG_GPUS, DISAGG_RATE = 4, 36
DISAGG_PROMPT_MIN, DISAGG_PROMPT_MAX, DISAGG_OUTPUT_MIN, DISAGG_OUTPUT_MAX = (
    1024,
    6144,
    16,
    256,
)
DISAGG_PROMPT = (DISAGG_PROMPT_MIN, DISAGG_PROMPT_MAX)
DISAGG_OUTPUT = (DISAGG_OUTPUT_MIN, DISAGG_OUTPUT_MAX)
# Published gains, each against the paper's own baseline:
ORCA_GAIN = 36.9  # Orca (Yu et al. 2022): throughput vs FasterTransformer, GPT-3 175B
SARATHI_GAIN = 2.6  # Sarathi-Serve: serving capacity vs vLLM, Mistral-7B, one A100
SPLITWISE_GAIN = 2.35  # Splitwise: throughput at the same cost and power


@cache
def _step_cost() -> RooflineStepCost:
    """The roofline step cost of Llama 3 8B on one H100."""
    return RooflineStepCost(preset(MODEL), GPUS[GPU])


def kv_capacity() -> int:
    """Tokens of bf16 KV cache next to the bf16 weights on one H100."""
    return kv_budget(preset(MODEL), GPUS[GPU]).tokens


def decode_step_ms(batch: int, context: int = CONTEXT) -> float:
    """One decode step of ``batch`` sequences of ``context`` cached tokens, ms."""
    return 1e3 * float(_step_cost()([], batch, batch * context))


def batch_step_ms() -> float:
    """A decode step of MAX_BATCH sequences of CONTEXT cached tokens, ms."""
    return decode_step_ms(MAX_BATCH)


def long_prefill_ms() -> float:
    """One step that prefills a prompt of PROMPT_MAX tokens, ms."""
    return 1e3 * float(_step_cost()([(PROMPT_MAX, 0)], 0, 0))


def mixed_step_ms(batch: int = MAX_BATCH, context: int = CONTEXT) -> float:
    """A decode step of ``batch`` sequences with a prompt chunk filling the budget."""
    chunk = [(TOKEN_BUDGET - batch, 0)]
    return 1e3 * float(_step_cost()(chunk, batch, batch * context))


def decode_speedup(batch: int = MAX_BATCH) -> float:
    """Tokens per second of a decode step of ``batch`` over a step of one."""
    return batch * decode_step_ms(1) / decode_step_ms(batch)


def prompt_kv_mb(prompt: int = DISAGG_PROMPT_MAX) -> float:
    """Bytes of bf16 KV cache of a prompt, MB (1e6 bytes)."""
    return prompt * _step_cost().kv_bytes / 1e6


def nic_gbps() -> float:
    """The inter-node link's bandwidth, Gb/s (bits)."""
    return 8 / INTER_NODE.beta / 1e9


def transfer_ms(prompt: int = DISAGG_PROMPT_MAX, link: str = "ib400") -> float:
    """Time to send a prompt's KV cache over NVLink or one 400 Gb/s NIC, ms."""
    chosen = intra_node_link(GPU) if link == "nvlink" else INTER_NODE
    return 1e3 * kv_transfer_time(prompt, _step_cost().kv_bytes, chosen)


def _run(policy: str, trace: list[Request]) -> list[Record]:
    if policy == "static":
        result = simulate_static(trace, _step_cost(), MAX_BATCH, kv_capacity())
    else:
        budget = TOKEN_BUDGET if policy == "chunked" else None
        result = simulate_continuous(
            trace, _step_cost(), MAX_BATCH, kv_capacity(), budget
        )
    return result.records


@cache
def _rate_sweep() -> dict[str, list[dict[str, float]]]:
    """Summaries of each policy at each request rate (one GPU, the same traces)."""
    traces = [poisson_trace(N_REQUESTS, r, PROMPT, OUTPUT, SEED) for r in RATES]
    return {p: [latency_summary(_run(p, t)) for t in traces] for p in POLICIES}


def _sweep_value(policy: str, key: str, rate: int, unit: float) -> float:
    value = _rate_sweep()[policy][RATES.index(rate)][key]
    return value / unit if key.startswith(("ttft", "tpot")) else value


def at_low_rate(policy: str, key: str, unit: float = 1e-3) -> float:
    """A summary value at LOW_RATE; latencies in ``unit`` seconds (ms)."""
    return _sweep_value(policy, key, LOW_RATE, unit)


def at_tail_rate(policy: str, key: str, unit: float = 1e-3) -> float:
    """A summary value at TAIL_RATE; latencies in ``unit`` seconds (ms)."""
    return _sweep_value(policy, key, TAIL_RATE, unit)


def peak_throughput(policy: str) -> float:
    """Highest output tokens/s of a policy over the sweep."""
    return max(s["throughput"] for s in _rate_sweep()[policy])


def rate_figure() -> Figure:
    """Throughput, p99 TTFT and p99 TPOT against the request rate, three policies."""
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    axes = fig.subplots(1, 3)
    panels = (
        ("throughput", 1e-3, "output tokens/s (thousands)"),
        ("ttft_p99", 1.0, "p99 TTFT (s)"),
        ("tpot_p99", 1e3, "p99 TPOT (ms)"),
    )
    for ax, (key, scale, label) in zip(axes, panels, strict=True):
        for policy, style in zip(POLICIES, ("s--", "o-", "^-"), strict=True):
            ys = [scale * s[key] for s in _rate_sweep()[policy]]
            ax.plot(RATES, ys, style, label=policy, markersize=4)
        ax.set_xlabel("requests per second")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    return fig


GANTT_TRACE = [  # (arrival s, prompt, output): six requests for the timeline
    (0.0, 512, 40),
    (0.0, 256, 10),
    (0.01, 1024, 25),
    (0.03, 128, 30),
    (0.06, 512, 8),
    (0.09, 256, 20),
]
GANTT_BATCH, N_GANTT = 3, len(GANTT_TRACE)
_GANTT_TIMES = ("arrival", "admitted", "first_token", "finish", "released")


def gantt_figure() -> Figure:
    """Timeline of six requests under static and continuous batching, batch 3."""
    trace = [Request(i, a, p, o) for i, (a, p, o) in enumerate(GANTT_TRACE)]
    static = simulate_static(trace, _step_cost(), GANTT_BATCH, kv_capacity())
    continuous = simulate_continuous(trace, _step_cost(), GANTT_BATCH, kv_capacity())
    fig = Figure(figsize=(8, 4.2), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    phases = (  # (start, end, colour, label) of each bar
        ("arrival", "admitted", "0.85", "waiting"),
        ("admitted", "first_token", "C1", "prefill (to the first token)"),
        ("first_token", "finish", "C0", "decode"),
        ("finish", "released", "0.55", "slot held by the batch"),
    )
    for ax, (title, result) in zip(
        axes, (("static", static), ("continuous", continuous)), strict=True
    ):
        for row, rec in enumerate(result.records):
            times = {t: getattr(rec, t) for t in _GANTT_TIMES}
            for start, end, colour, label in phases:
                left, width = 1e3 * times[start], 1e3 * (times[end] - times[start])
                if width > 0:
                    ax.barh(row, width, left=left, color=colour, label=label)
        ax.set_yticks(range(len(trace)), [f"r{i}" for i in range(len(trace))])
        ax.invert_yaxis()
        ax.set_title(title, fontsize=9)
        ax.grid(True, axis="x", alpha=0.3)
    handles, labels = [], []
    for ax in axes:  # one legend entry per phase drawn
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles, labels = handles + [h], labels + [label]
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=8)
    axes[1].set_xlabel("time (ms)")
    return fig


def gantt_finish_ms(policy: str) -> float:
    """When the last of the six timeline requests finishes, ms."""
    trace = [Request(i, a, p, o) for i, (a, p, o) in enumerate(GANTT_TRACE)]
    simulate = simulate_static if policy == "static" else simulate_continuous
    records = simulate(trace, _step_cost(), GANTT_BATCH, kv_capacity()).records
    return 1e3 * max(r.finish for r in records)


SMALL_BUDGET = 256  # the tighter chunked-prefill budget of the comparison
DISAGG_SETUPS = (  # (label, prefill GPUs or None for colocated, decode GPUs/budget)
    ("colocated, continuous", None, None),
    (f"colocated, chunked {SMALL_BUDGET}", None, SMALL_BUDGET),
    ("colocated, chunked 512", None, 512),
    ("1 prefill + 3 decode", 1, 3),
    ("2 prefill + 2 decode", 2, 2),
    ("3 prefill + 1 decode", 3, 1),
)


@cache
def _disagg_runs() -> dict[str, dict[str, float]]:
    """Summaries of each setup on DISAGG_GPUS H100s at DISAGG_RATE requests/s."""
    trace = poisson_trace(N_REQUESTS, DISAGG_RATE, DISAGG_PROMPT, DISAGG_OUTPUT, SEED)
    cost, cap, out = _step_cost(), kv_capacity(), {}
    for label, prefill, other in DISAGG_SETUPS:
        if prefill is None:
            records = simulate_colocated(
                trace, cost, DISAGG_GPUS, MAX_BATCH, cap, other
            )
        else:
            records = simulate_disaggregated(
                trace, cost, prefill, other, INTER_NODE, cost.kv_bytes, MAX_BATCH, cap
            )
        out[label] = latency_summary(records)
    return out


def disagg_value(label: str, key: str, unit: float = 1e-3) -> float:
    """One summary value of a setup; latencies in ``unit`` seconds (ms)."""
    value = _disagg_runs()[label][key]
    return value / unit if key.startswith(("ttft", "tpot")) else value


def disagg_table() -> Table:
    """Throughput and latency percentiles of each setup."""
    keys = ("throughput", "ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")
    rows = [
        [label] + [round(disagg_value(label, k), 1) for k in keys]
        for label, _, _ in DISAGG_SETUPS
    ]
    columns = ["setup", "tokens/s", "TTFT p50 ms", "TTFT p99 ms"]
    note = (
        "Simulated with the roofline step cost of Llama 3 8B on H100s (a cost "
        "model, not a measurement); KV caches sent over one 400 Gb/s NIC."
    )
    stamp = (
        "{gpus} GPUs, {requests} requests at {rate} per second, prompts {prompts}, "
        "outputs {outputs} tokens"
    )
    fields = {
        "gpus": DISAGG_GPUS,
        "requests": N_REQUESTS,
        "rate": DISAGG_RATE,
        "prompts": str(DISAGG_PROMPT),
        "outputs": str(DISAGG_OUTPUT),
    }
    columns += ["TPOT p50 ms", "TPOT p99 ms"]
    return Table(columns, rows, note, stamp, fields=fields)


def disagg_figure() -> Figure:
    """p99 TPOT against p99 TTFT of each setup: the trade-off."""
    fig = Figure(figsize=(6.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    styles = ("C0o", "C0s", "C0D", "C3^", "C3v", "C3<")  # blue: colocated
    for (label, _, _), style in zip(DISAGG_SETUPS, styles, strict=True):
        x, y = disagg_value(label, "ttft_p99"), disagg_value(label, "tpot_p99")
        ax.plot([x], [y], style, markersize=8, label=label)
    ax.legend(fontsize=8, loc="upper right")
    ax.set_xscale("log")
    ticks = (100, 200, 500, 1000, 2000, 5000, 10000)
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("p99 TTFT (ms)")
    ax.set_ylabel("p99 TPOT (ms)")
    ax.grid(True, which="both", alpha=0.3)
    return fig


# One iteration at a time: the engine's scheduler, run on the tiny model

ITER_BLOCKS, ITER_BLOCK_SIZE = 7, 2  # the KV pool of the step-by-step example
ITER_BUDGET, ITER_SEQS = 6, 3  # tokens and sequences per iteration
_ITER_ARRIVALS = {  # step -> (prompt length, max_tokens) of the requests arriving
    0: ((3, 4), (2, 4)),
    1: ((2, 3),),
    2: ((7, 2),),
}
_KIND_COLOURS = {"prefill": "C1", "decode": "C0", "recompute": "C3"}
_CELL_STYLES = {
    "waiting": {"color": "0.88"},
    "preempted": {"facecolor": "white", "edgecolor": "C3", "hatch": "xx"},
}
_KIND_LABELS = {
    "prefill": "prompt chunk",
    "decode": "decode",
    "recompute": "recomputation",
}


@cache
def _iterations() -> tuple[Iteration, ...]:
    """The engine's scheduler run step by step on the example (tiny random model)."""
    engine = Engine(
        tiny_model(0),
        num_blocks=ITER_BLOCKS,
        block_size=ITER_BLOCK_SIZE,
        max_num_seqs=ITER_SEQS,
        max_num_batched_tokens=ITER_BUDGET,
        enable_prefix_caching=False,
    )
    start, arrivals = 1, {}
    for step, requests in _ITER_ARRIVALS.items():
        arrivals[step] = []
        for prompt, out in requests:
            tokens = list(range(start, start + prompt))
            arrivals[step].append((tokens, SamplingParams(max_tokens=out)))
            start += prompt
    return tuple(trace_iterations(engine, arrivals))


def _draw_iterations(ax: Axes, shown: int, fontsize: float) -> None:
    """The first ``shown`` iterations: what each request did, and the free blocks."""
    trace = _iterations()
    ids = sorted({r for it in trace for r in it.arrived}, key=int)
    arrived: set[str] = set()
    done: set[str] = set()
    for it in trace[:shown]:
        x = it.step
        arrived |= set(it.arrived)
        ran = {r: (kind, n) for r, kind, n in it.ran}
        for row, r in enumerate(ids):
            if r not in arrived or r in done:
                continue
            state = ran[r][0] if r in ran else "waiting"
            state = "preempted" if r in it.preempted else state
            ax.bar(
                x,
                0.8,
                bottom=row - 0.4,
                width=0.9,
                gid=f"{state}:{r}:{x}",
                **_CELL_STYLES.get(state, {"color": _KIND_COLOURS.get(state)}),
            )
            if r in ran:  # the tokens it ran
                ax.text(
                    x,
                    row,
                    str(ran[r][1]),
                    ha="center",
                    va="center",
                    color="white",
                    fontsize=fontsize,
                )
            if r in it.first_token:
                ax.plot(
                    x + 0.32,
                    row - 0.28,
                    "*",
                    color="gold",
                    markersize=fontsize,
                    markeredgecolor="0.2",
                )
            if r in it.finished:
                ax.plot([x + 0.47] * 2, [row - 0.45, row + 0.45], color="0.1", lw=3)
        done |= set(it.finished)
        ax.text(
            x,
            len(ids) - 0.1,
            str(it.free_blocks),
            ha="center",
            va="center",
            fontsize=fontsize,
        )
    handles = [
        Patch(color=_KIND_COLOURS[k], label=_KIND_LABELS[k]) for k in _KIND_COLOURS
    ]
    handles += [
        Patch(**_CELL_STYLES["waiting"], label="waiting"),
        Patch(**_CELL_STYLES["preempted"], label="preempted"),
        Line2D(
            [],
            [],
            marker="*",
            ls="",
            color="gold",
            markeredgecolor="0.2",
            label="first token",
        ),
        Line2D([], [], color="0.1", lw=3, label="finished"),
    ]
    ax.set_xlim(-0.55, len(trace) - 0.45)
    ax.set_ylim(len(ids) + 0.3, -0.6)
    ax.set_xticks(range(len(trace)))
    ax.set_yticks(range(len(ids) + 1), ids + ["free blocks"])
    ax.set_xlabel("iteration", fontsize=fontsize)
    ax.set_ylabel("request", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize, length=0)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.legend(
        handles=handles,
        loc="center left",
        bbox_to_anchor=(1.01, 0.5),
        fontsize=fontsize,
        frameon=False,
    )


def iteration_figure() -> Figure:
    """Every iteration of the engine's scheduler on the four-request example."""
    fig = Figure(figsize=(7.5, 3.0), layout="constrained")
    _draw_iterations(fig.subplots(), len(_iterations()), 9)
    return fig


def iteration_frames() -> list[Figure]:
    """The same picture one iteration at a time, at slide size."""
    frames = []
    for shown in range(1, len(_iterations()) + 1):
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_iterations(fig.subplots(), shown, 15)
        frames.append(fig)
    return frames


def iteration_count() -> int:
    """Iterations the engine runs to serve the four requests of the example."""
    return len(_iterations())


def preempted_request() -> int:
    """The request the example preempts (the latest admitted when blocks ran out)."""
    return int(next(r for it in _iterations() for r in it.preempted))


def preempted_at() -> int:
    """The iteration at which the example's request is preempted."""
    return next(it.step for it in _iterations() if it.preempted)
