"""What ``docs/inference/sampling.rst`` shows: its values, table and figures.

Every figure runs the processors of :mod:`aiinfra.infer.sampling` at build time on
small fixed inputs: a hand-made row of 12 logits, a Zipf law over 1000 tokens, and
the synthetic second-order Markov language of :mod:`aiinfra.infer.distill.train`,
whose true probabilities are known, decoded for a few hundred tokens.
"""

from __future__ import annotations

import functools
import math

import torch
from matplotlib.figure import Figure

from aiinfra.infer.distill.train import markov_language
from aiinfra.infer.sampling import (
    apply_temperature,
    min_p_filter,
    next_token,
    repetition_penalty,
    top_k_filter,
    top_p_filter,
)
from aiinfra.models.presets import preset
from aiinfra.report import Table

# one next-token row, made by hand: a clear favourite, a shoulder, a long tail
SAMPLING_LOGITS = (3.0, 2.6, 2.2, 1.5, 1.2, 1.0, 0.4, 0.1, -0.4, -0.9, -1.4, -2.2)
SAMPLING_TOP_K = 3
SAMPLING_TOP_P = 0.8
SAMPLING_MIN_P = 0.15
SAMPLING_PENALTY = 1.5  # CTRL's paper suggests 1.2; larger to be visible
SAMPLING_ZIPF_V = 1000  # the Zipf row of the temperature-order figure
SAMPLING_STEPS = 300  # tokens decoded per strategy in the greedy-vs-sampling run
# strategy label -> next_token settings (temperature 0 is greedy)
SAMPLING_STRATEGIES = {
    "greedy": {"temperature": 0.0},
    "T = 0.7": {"temperature": 0.7},
    "T = 1": {"temperature": 1.0},
    f"top-k = {SAMPLING_TOP_K}": {"top_k": SAMPLING_TOP_K},
    f"top-p = {SAMPLING_TOP_P}": {"top_p": SAMPLING_TOP_P},
    f"min-p = {SAMPLING_MIN_P}": {"min_p": SAMPLING_MIN_P},
}


def _row() -> torch.Tensor:
    return torch.tensor([SAMPLING_LOGITS], dtype=torch.float64)  # (1, V)


def _filtered() -> dict[str, torch.Tensor]:
    x = _row()
    return {
        "original": x,
        "temperature 0.5": apply_temperature(x, 0.5),
        "temperature 2": apply_temperature(x, 2.0),
        f"top-k, k = {SAMPLING_TOP_K}": top_k_filter(x, SAMPLING_TOP_K),
        f"top-p, p = {SAMPLING_TOP_P}": top_p_filter(x, SAMPLING_TOP_P),
        f"min-p = {SAMPLING_MIN_P}": min_p_filter(x, SAMPLING_MIN_P),
    }


def sampling_kept(name: str) -> int:
    """Tokens a filter of the 12-logit example keeps: ``top_k``, ``top_p``, ``min_p``.

    Raises:
        ValueError: another name.
    """
    rows = {"top_k": 3, "top_p": 4, "min_p": 5}
    if name not in rows:
        raise ValueError(f"name must be one of {sorted(rows)}, got {name!r}")
    x = list(_filtered().values())[rows[name]]
    return int(torch.isfinite(x).sum())


def sampling_top_probability(temperature: float) -> float:
    """Probability of the favourite token of the example at ``temperature``, %."""
    return 100 * float(apply_temperature(_row(), temperature).softmax(-1).max())


def sampling_filters_figure() -> Figure:
    """The example's law before and after temperature and each filter."""
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    axes = fig.subplots(2, 3, sharey=True)
    base = _row().softmax(-1)[0]
    idx = range(len(SAMPLING_LOGITS))
    for ax, (title, x) in zip(axes.flat, _filtered().items(), strict=True):
        p = x.softmax(-1)[0]
        ax.bar(idx, base, color="none", edgecolor="0.6", label="original")
        ax.bar(idx, p, color="C0", alpha=0.85, label="after")
        kept = int(torch.isfinite(x).sum())
        ax.set_title(f"{title} ({kept} kept)", fontsize=8)
        ax.set_xticks([])
    for ax in axes[:, 0]:
        ax.set_ylabel("probability")
    for ax in axes[1]:
        ax.set_xlabel("tokens, most likely first")
    axes[0, 0].legend(fontsize=7)
    return fig


def _zipf() -> torch.Tensor:
    ranks = torch.arange(1, SAMPLING_ZIPF_V + 1, dtype=torch.float64)
    return (-1.1 * ranks.log())[None]  # (1, V): p proportional to rank^-1.1


def sampling_order_figure() -> Figure:
    """Tokens kept by each filter when it runs after the temperature (Zipf row)."""
    temps = [0.3 + 0.05 * i for i in range(35)]
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    filters = {
        "top-k, k = 50": lambda x: top_k_filter(x, 50),
        "top-p, p = 0.9": lambda x: top_p_filter(x, 0.9),
        "min-p = 0.05": lambda x: min_p_filter(x, 0.05),
    }
    for label, f in filters.items():
        kept = [
            int(torch.isfinite(f(apply_temperature(_zipf(), t))).sum()) for t in temps
        ]
        ax.plot(temps, kept, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("temperature (applied first)")
    ax.set_ylabel("tokens kept")
    ax.legend(fontsize=7)
    return fig


def sampling_order_table() -> Table:
    """The processors in the order transformers' ``generate`` applies them."""
    rows = [
        [
            1,
            "repetition penalty",
            "RepetitionPenaltyLogitsProcessor",
            "repetition_penalty",
        ],
        [2, "temperature", "TemperatureLogitsWarper", "apply_temperature"],
        [3, "top-k", "TopKLogitsWarper", "top_k_filter"],
        [4, "top-p", "TopPLogitsWarper", "top_p_filter"],
        [5, "min-p", "MinPLogitsWarper", "min_p_filter"],
    ]
    return Table(
        ["step", "processor", "transformers class", "this package"],
        rows,
        "The order of transformers' generation utilities; each row is tested equal.",
        words=(1,),
    )


def sampling_vocab() -> int:
    """Llama 3's vocabulary: the width of the row every filter runs over."""
    return preset("llama-3-8b").vocab_size


def sampling_penalty_figure() -> Figure:
    """The example's logits before and after CTRL's penalty on four seen tokens."""
    x = _row() - 1.0  # shifted so that seen tokens have both signs
    seen = torch.tensor([[0, 3, 8, 10]])
    y = repetition_penalty(x, seen, SAMPLING_PENALTY)
    fig = Figure(figsize=(5.5, 2.6), layout="constrained")
    ax = fig.add_subplot()
    idx = torch.arange(x.shape[1])
    ax.bar(idx - 0.2, x[0], width=0.4, color="0.7", label="logits")
    ax.bar(idx + 0.2, y[0], width=0.4, color="C3", label="after the penalty")
    for i in seen[0].tolist():
        ax.annotate("seen", (i, max(float(x[0, i]), 0) + 0.1), ha="center", fontsize=7)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xlabel("tokens")
    ax.set_ylabel("logit")
    ax.legend(fontsize=7)
    return fig


@functools.cache
def _decoded() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The language's log-probabilities and each strategy's decoded tokens."""
    probs = markov_language(32, 12, 1.5, torch.Generator().manual_seed(0))
    logp = probs.log()  # (V, V, V); -inf where a successor is not allowed
    out = {}
    for i, (label, settings) in enumerate(SAMPLING_STRATEGIES.items()):
        g = torch.Generator().manual_seed(i)
        seq = [0, 1]
        for _ in range(SAMPLING_STEPS):
            row = logp[seq[-2], seq[-1]][None]  # (1, V)
            seq.append(int(next_token(row, g, **settings)))
        out[label] = torch.tensor(seq)
    return logp, out


def _logprob(label: str) -> float:
    """Mean log-probability per decoded token under the language (nats)."""
    logp, out = _decoded()
    s = out[label]
    return float(logp[s[:-2], s[1:-1], s[2:]].mean())


def sampling_distinct_4grams(label: str) -> int:
    """Distinct 4-grams among the last 200 decoded tokens of a strategy."""
    s = _decoded()[1][label][-200:].tolist()
    return len({tuple(s[i : i + 4]) for i in range(len(s) - 3)})


def sampling_greedy_figure() -> Figure:
    """Log-probability per token and distinct 4-grams, per decoding strategy."""
    labels = list(SAMPLING_STRATEGIES)
    fig = Figure(figsize=(7, 2.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.barh(labels, [_logprob(s) for s in labels], color="C0")
    left.set_xlabel("mean log-probability per token (nats)")
    left.invert_yaxis()
    right.barh(labels, [sampling_distinct_4grams(s) for s in labels], color="C2")
    right.set_xlabel("distinct 4-grams in the last 200 tokens")
    right.invert_yaxis()
    right.set_yticks([])
    right.axvline(197, color="k", ls=":", lw=0.8)
    return fig


def sampling_perplexity_ratio() -> float:
    """How many times more probable per token greedy text is than sampled text."""
    return math.exp(_logprob("greedy") - _logprob("T = 1"))
