"""What ``docs/inference/engine.rst`` shows: its values, tables, figures.

The layout figure is computed by :class:`~aiinfra.infer.engine.layout.StepLayout`
on a three-sequence example; the timings come from the stamped file of
``aiinfra bench engine`` (:mod:`aiinfra.infer.engine.bench`); the GPU comparison
is the roofline step cost of :mod:`aiinfra.book.inference.batching`. The comparison
with transformers is the stamped file of ``aiinfra bench engine --against
transformers`` (:mod:`aiinfra.infer.engine.compare`).
"""

from __future__ import annotations

from functools import cache

import torch
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.infer.engine import bench as engine_bench
from aiinfra.infer.engine import load, server
from aiinfra.infer.engine.compare import config as compare_config
from aiinfra.infer.engine.compare import tables as compare_tables
from aiinfra.infer.engine.layout import Chunk, StepLayout
from aiinfra.report import Table

LAYOUT_BLOCK = 4  # block size of the layout example
# The example step: A decodes its 7th token, B runs the second chunk of its
# prompt, C the first chunk of a new one (tables: physical block ids).
LAYOUT_CHUNKS = (
    ("A: decode", Chunk([11], 6, [5, 2])),
    ("B: second prompt chunk", Chunk([21, 22, 23, 24], 4, [0, 7])),
    ("C: first prompt chunk", Chunk([31, 32, 33], 0, [3])),
)


def _layout() -> StepLayout:
    """The example step's layout."""
    return StepLayout(
        [c for _, c in LAYOUT_CHUNKS], LAYOUT_BLOCK, 8, torch.device("cpu")
    )


def layout_tokens() -> int:
    """Tokens packed into the example step (``N``)."""
    return _layout().num_tokens


def layout_figure() -> Figure:
    """Which cached positions each new token of the example step sees."""
    lay, B = _layout(), LAYOUT_BLOCK
    L_max = max(c.start + len(c.tokens) for _, c in LAYOUT_CHUNKS)
    T_max = max(len(c.tokens) for _, c in LAYOUT_CHUNKS)
    fig = Figure(figsize=(7.2, 2.6), layout="constrained")
    axes = fig.subplots(1, len(LAYOUT_CHUNKS))
    for s, (ax, (name, chunk)) in enumerate(zip(axes, LAYOUT_CHUNKS, strict=True)):
        seen = lay.visible_of(s)  # (T_s, L_s)
        T, L = seen.shape
        grid = torch.zeros(T_max, L_max)
        grid[:T, :L] = 0.25  # in this sequence's blocks
        grid[:T, :L][seen] = 1.0  # seen by the new token
        ax.imshow(grid, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        for edge in range(B, L_max, B):
            ax.axvline(edge - 0.5, color="k", linewidth=1)
        for j, block in enumerate(chunk.block_table[: -(-L // B)]):
            ax.text(  # the physical block above its slots
                j * B + (B - 1) / 2,
                1.02,
                f"#{block}",
                ha="center",
                va="bottom",
                fontsize=8,
                transform=ax.get_xaxis_transform(),
            )
        ax.set_title(name, fontsize=9, pad=16)
        ax.set_xticks(range(L_max))
        ax.set_yticks(range(T), [str(chunk.start + t) for t in range(T)])
        ax.set_xlabel("key position")
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("query position")
    return fig


@cache
def _bench() -> dict:
    return results.load("engine", "cpu")


def engine_config(name: str) -> int:
    """A size of the stamped run (``requests``, ``static_batch``, ...)."""
    return _bench()["config"][name]


def largest_batch() -> int:
    """The largest ``max_num_seqs`` of the sweep."""
    return max(int(s) for s in _bench()["sweep"])


def sweep_tokens_per_s(batch: int | None = None) -> float:
    """Measured tokens/s at ``max_num_seqs = batch`` (default: the largest)."""
    return _bench()["sweep"][str(batch or largest_batch())]["tokens_per_s"]


def sweep_gain() -> float:
    """Throughput at the largest batch over throughput one request at a time."""
    return sweep_tokens_per_s() / sweep_tokens_per_s(1)


def fixed_step_ms() -> float:
    """Fitted fixed cost of a step, ms (``a`` of ``a + b n``)."""
    return 1e3 * engine_bench.step_time_fit(_bench())[0]


def per_token_ms() -> float:
    """Fitted cost of each token generated in a step, ms (``b``)."""
    return 1e3 * engine_bench.step_time_fit(_bench())[1]


def fit_tokens_per_s(n: int) -> float:
    """Tokens/s that the fitted step cost predicts with ``n`` tokens per step."""
    a, b = engine_bench.step_time_fit(_bench())
    return n / (a + b * n)


def fit_gain(n: int) -> float:
    """Throughput with ``n`` tokens per step over one, by the fitted step cost."""
    return fit_tokens_per_s(n) / fit_tokens_per_s(1)


def batching_value(kind: str, key: str) -> float:
    """A measured value of ``static`` or ``continuous`` batching."""
    return _bench()[kind][key]


def continuous_gain() -> float:
    """Throughput of continuous over static batching at the same batch size."""
    return batching_value("continuous", "tokens_per_s") / batching_value(
        "static", "tokens_per_s"
    )


def engine_table() -> Table:
    """Static against continuous batching, measured."""
    return engine_bench.engine_table(_bench())


def prefix_table() -> Table:
    """The prefix cache on and off, measured."""
    return engine_bench.prefix_table(_bench())


def prefix_value(state: str, key: str) -> float:
    """A measured value with the prefix cache ``on`` or ``off``.

    ``key``: ``computed_prompt_tokens``, ``prompt_tokens``, or ``ttft_ms`` (the
    mean TTFT after the first request).
    """
    run = _bench()["prefix"][state]
    if key == "ttft_ms":
        return 1e3 * sum(run["ttft_s"][1:]) / (len(run["ttft_s"]) - 1)
    return run[key]


def prefix_ttft_gain() -> float:
    """Mean TTFT with the cache off over on."""
    return prefix_value("off", "ttft_ms") / prefix_value("on", "ttft_ms")


def sweep_figure() -> Figure:
    """Measured throughput against max_num_seqs, and step time against batch."""
    res = _bench()
    sizes = sorted(int(s) for s in res["sweep"])
    runs = [res["sweep"][str(s)] for s in sizes]
    fig = Figure(figsize=(7, 3.1), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(sizes, [r["tokens_per_s"] for r in runs], "o-")
    left.set_xscale("log", base=2)
    left.set_xticks(sizes, [str(s) for s in sizes])
    left.set_xlabel("max_num_seqs")
    left.set_ylabel("generated tokens/s")
    n = [res["generated_tokens"] / r["steps"] for r in runs]
    t = [1e3 * r["seconds"] / r["steps"] for r in runs]
    a, b = engine_bench.step_time_fit(res)
    right.plot(n, t, "o", label="measured")
    right.plot(
        [0, max(n)], [1e3 * a, 1e3 * (a + b * max(n))], "--", label="a + b n fit"
    )
    right.set_xlabel("tokens generated per step, n")
    right.set_ylabel("ms per step")
    right.set_xlim(left=0)
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(True, alpha=0.3)
    return fig


def prefix_figure() -> Figure:
    """TTFT of each request with the prefix cache off and on, measured."""
    res = _bench()["prefix"]
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for state, style in (("off", "s-"), ("on", "o-")):
        ttft = [1e3 * s for s in res[state]["ttft_s"]]
        ax.plot(range(1, len(ttft) + 1), ttft, style, label=f"prefix cache {state}")
    ax.set_xlabel("request")
    ax.set_ylabel("TTFT (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


@cache
def _hf() -> dict:
    return results.load(compare_config.KIND, "cpu")


def hf_config(name: str) -> int:
    """A size of the stamped comparison (``output_len``, ``vary_max``, ...)."""
    return _hf()["config"][name]


def hf_largest_batch() -> int:
    """The largest batch of the comparison's equal-length runs."""
    return max(int(b) for b in _hf()["equal"])


def hf_batch(i: int) -> int:
    """The ``i``-th batch size of the comparison's equal-length runs."""
    return sorted(int(b) for b in _hf()["equal"])[i]


def _row(i: int | None) -> dict:
    return _hf()["vary"] if i is None else _hf()["equal"][str(hf_batch(i))]


def _tokens_per_s(system: str, i: int | None = None) -> float:
    """Measured tokens/s of ``system``.

    At the ``i``-th batch size with equal output lengths, or (``None``) with
    varying ones.
    """
    return _row(i)[system]["tokens_per_s"]


def hf_speedup(system: str, i: int | None = None) -> float:
    """The engine's tokens/s over ``system``'s (wall time).

    ``i``: the batch size's index (``None``: varying lengths).
    """
    return _tokens_per_s("engine", i) / _tokens_per_s(system, i)


def hf_cpu_speedup(system: str, i: int | None = None) -> float:
    """The engine's speed-up over ``system`` by the processes' CPU time."""
    row = _row(i)
    return row["engine"]["cpu_tokens_per_s"] / row[system]["cpu_tokens_per_s"]


def hf_min_speedup(system: str) -> float:
    """The engine's smallest speed-up over ``system`` across the batches (wall)."""
    return min(hf_speedup(system, i) for i in range(len(_hf()["equal"])))


def hf_spread(i: int | None = None) -> float:
    """The largest ratio of slowest to fastest run of one system.

    ``i``: the batch size's index (``None``: varying lengths); how much runs vary
    on this machine.
    """
    row = _row(i)
    walls = [[r["wall_s"] for r in row[s]["runs"]] for s in compare_config.SYSTEMS]
    return max(max(w) / min(w) for w in walls)


def hf_load(i: int | None = None) -> float:
    """The machine's mean one-minute load average over the runs of a regime."""
    loads = [r["load"] for s in compare_config.SYSTEMS for r in _row(i)[s]["runs"]]
    return sum(loads) / len(loads)


def target(name: str) -> float:
    """A speed-up the engine was asked to reach.

    ``generate``: over padded generate, equal lengths; ``generate@vary``: over it
    with varying lengths; ``generate_batch``: over transformers' continuous
    batching at every batch.
    """
    return compare_config.TARGETS[name]


def _mismatches(system: str) -> list[dict]:
    rows = [*_hf()["equal"].values(), _hf()["vary"]]
    return [m for row in rows for m in row[system]["mismatches"]]


def hf_mismatches(system: str) -> int:
    """Requests whose greedy tokens from ``system`` differ from the engine's."""
    return len(_mismatches(system))


def hf_mismatch_position(system: str) -> int:
    """The earliest generated position at which ``system`` parts from the engine."""
    return min(m["position"] for m in _mismatches(system))


def hf_mismatch_gap(system: str) -> float:
    """The largest logit gap at which ``system`` and the engine part.

    A gap near float32 rounding is a tie that either implementation may break.
    """
    return max(abs(m["logit_gap"]) for m in _mismatches(system))


def hf_server_differing() -> int:
    """Requests whose streamed text differs between the two servers."""
    return _hf()["servers"]["differing_texts"]


def hf_server_differing_before_end() -> int:
    """Requests whose streamed texts differ before their trailing U+FFFD."""
    return _hf()["servers"]["differing_before_the_end"]


def hf_server(name: str, key: str) -> float:
    """A measured value of a server's best run.

    ``key``: ``tokens_per_s``, ``failed``, ``ttft_p50_ms``, ``ttft_p99_ms`` or
    ``tpot_ms`` (the mean time per output token).
    """
    run = _hf()["servers"]["runs"][name]
    if key.endswith("_ms"):
        src = {"ttft_p50_ms": "ttft_p50_s", "ttft_p99_ms": "ttft_p99_s"}
        return 1e3 * run[src.get(key, "tpot_mean_s")]
    return run[key]


def hf_server_gain() -> float:
    """``aiinfra serve``'s throughput over ``transformers serve``'s."""
    return hf_server("aiinfra serve", "tokens_per_s") / hf_server(
        "transformers serve", "tokens_per_s"
    )


def _profile_ms(part: str) -> float:
    """Milliseconds of a decode step at the largest batch spent on ``part``."""
    return _hf()["profile"][part]


def profile_share(part: str) -> float:
    """The share of a decode step at the largest batch spent on ``part``, %."""
    return 100 * _profile_ms(part) / _profile_ms("step")


def offline_table() -> Table:
    """The engine, continuous batching and padded generate of transformers."""
    return compare_tables.offline_table(_hf())


def server_table() -> Table:
    """The two servers under the same streamed load."""
    return compare_tables.server_table(_hf())


def profile_table() -> Table:
    """Where the engine's decode step goes at the largest batch."""
    return compare_tables.profile_table(_hf())


def ramp_streams() -> int:
    """The most concurrent streams of the suite's load test."""
    return load.RAMP[-1]


def ramp_requests() -> int:
    """The requests of the suite's load test."""
    return load.RAMP_REQUESTS


def backlog() -> int:
    """The server's listen backlog (Python's default is 5)."""
    return server.BACKLOG


_COLORS = {"engine": "C0", "generate_batch": "C1", "generate": "C2"}
_LABELS = {
    "engine": "engine",
    "generate_batch": "generate_batch",
    "generate": "padded generate",
}


def compare_figure() -> Figure:
    """Throughput of the three offline paths and latency of the two servers."""
    res = _hf()
    fig = Figure(figsize=(7.6, 2.9), layout="constrained")
    eq, var, srv = fig.subplots(1, 3, width_ratios=(1.4, 0.9, 1.1))
    batches = sorted(int(b) for b in res["equal"])
    for s in compare_config.SYSTEMS:
        eq.plot(
            batches,
            [res["equal"][str(b)][s]["tokens_per_s"] for b in batches],
            "o-",
            color=_COLORS[s],
            label=_LABELS[s],
        )
    eq.set_xscale("log", base=2)
    eq.set_xticks(batches, [str(b) for b in batches])
    eq.set_xlabel("sequences at once")
    eq.set_ylabel("generated tokens/s")
    eq.set_title("equal output lengths", fontsize=9)
    eq.legend(fontsize=7)
    var.bar(
        range(3),
        [res["vary"][s]["tokens_per_s"] for s in compare_config.SYSTEMS],
        color=[_COLORS[s] for s in compare_config.SYSTEMS],
    )
    var.set_xticks(
        range(3), ["engine", "generate_batch", "generate"], rotation=30, ha="right"
    )
    var.set_title("varying output lengths", fontsize=9)
    var.set_ylabel("generated tokens/s")
    runs = res["servers"]["runs"]
    names = [n for n in compare_config.SERVERS if n in runs]
    x = range(len(names))
    srv.bar(
        [i - 0.2 for i in x],
        [1e3 * runs[n]["ttft_p50_s"] for n in names],
        0.4,
        label="median",
        color="C4",
    )
    srv.bar(
        [i + 0.2 for i in x],
        [1e3 * runs[n]["ttft_p99_s"] for n in names],
        0.4,
        label="99th percentile",
        color="C3",
    )
    srv.set_xticks(list(x), [n.split()[0] for n in names])
    srv.set_ylabel("TTFT (ms)")
    srv.set_title("servers under load", fontsize=9)
    srv.legend(fontsize=7)
    for ax in (eq, var, srv):
        ax.grid(True, alpha=0.3, axis="y")
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=7)
    return fig


def admission_figure() -> Figure:
    """A request's path into the server: listen queue, admission, engine, or 503."""
    fig = Figure(figsize=(7.2, 2.4), layout="constrained")
    ax = fig.add_subplot()
    boxes = ["clients", "listen queue", "handler thread", "admission", "engine thread"]
    xs = [0.08 + 0.21 * i for i in range(len(boxes))]
    for x, text in zip(xs, boxes, strict=True):
        ax.text(
            x,
            0.62,
            text,
            ha="center",
            va="center",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "#dbe8f5", "edgecolor": "C0"},
        )
    for x, x2 in zip(xs, xs[1:], strict=False):
        ax.annotate(
            "",
            (x2 - 0.075, 0.62),
            (x + 0.075, 0.62),
            arrowprops={"arrowstyle": "->", "color": "0.3"},
        )
    ax.annotate(
        "", (xs[3], 0.2), (xs[3], 0.5), arrowprops={"arrowstyle": "->", "color": "C3"}
    )
    ax.text(
        xs[3],
        0.1,
        "queue full: answer at once, retry later",
        ha="center",
        va="center",
        fontsize=8,
        color="C3",
    )
    ax.text(xs[3] + 0.015, 0.34, "503", fontsize=8, color="C3")
    ax.annotate(
        "",
        (xs[0], 0.85),
        (xs[-1], 0.85),
        arrowprops={"arrowstyle": "->", "color": "C2"},
    )
    ax.text(0.5, 0.92, "streamed tokens", ha="center", fontsize=8, color="C2")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig
