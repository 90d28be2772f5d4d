"""What ``docs/inference/engine.rst`` shows: its values, tables, figures.

The layout figure is computed by :class:`~aiinfra.infer.engine.model_runner.StepLayout`
on a three-sequence example; the timings come from the stamped file of
``aiinfra bench engine`` (:mod:`aiinfra.infer.engine.bench`); the GPU comparison
is the roofline step cost of :mod:`aiinfra.book.inference.batching`.
"""

from __future__ import annotations

from functools import cache

import torch
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.infer.engine import bench as engine_bench
from aiinfra.infer.engine.model_runner import Chunk, StepLayout
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
