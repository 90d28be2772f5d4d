"""Perplexity of a small trained model under a KV cache budget, with and without sinks.

The model is trained on a synthetic language with a dependency of known reach:
token ``t`` repeats token ``t - lag`` with probability ``p_copy``, else follows token
``t - 1`` through a sparse successor table (Zipf weights, the table of
:mod:`~aiinfra.infer.quant.evaluate`). A cache that no longer holds token
``t - lag`` loses the copy and pays for it in perplexity; a cache that evicts what
the model leans on for other reasons (an attention sink) pays more. Each held-out
sequence is decoded token by token through :func:`~.eviction.streaming_nll` at every
budget, as a sliding window (``S = 0``) and with ``sinks`` sink tokens, and the
attention mass each layer puts on the first token is measured with the full cache.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import torch
from torch import Tensor

from aiinfra import progress
from aiinfra.infer.kv.eviction import check_budget, streaming_nll
from aiinfra.infer.quant.evaluate import language_tables, train_lm
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer

KIND = "kv-eviction"  # its kind of aiinfra.results


@dataclass(frozen=True)
class StreamingEvalConfig:
    """The language, the model, its training, the budgets; defaults: the book's."""

    successors: int = 3  # k successors per token in the table
    zipf: float = 1.0  # successor r has weight r^-zipf
    p_copy: float = 0.5  # probability that token t repeats token t - lag
    lag: int = 16  # reach of the copy, in tokens
    model: TransformerConfig = field(  # Llama-style: V = h = 64, 2 blocks of 4 heads
        default_factory=partial(TransformerConfig, 64, 64, 2, 4, d_ff=192)
    )
    seq_len: int = 64  # tokens per sequence, at most model.max_seq_len
    batch: int = 32
    steps: int = 600
    lr: float = 5e-3
    heldout_seqs: int = 128
    budgets: tuple[int, ...] = (8, 12, 16, 20, 24, 32, 48)  # cache budgets N
    sinks: int = 4  # StreamingLLM's S
    seed: int = 0

    def __post_init__(self) -> None:
        V, n = self.model.vocab_size, self.model.max_seq_len
        rules = {
            "successors": (1 <= self.successors <= V, f"in [1, vocab_size = {V}]"),
            "p_copy": (0.0 <= self.p_copy <= 1.0, "in [0, 1]"),
            "lag": (1 <= self.lag < self.seq_len, "in [1, seq_len)"),
            "seq_len": (3 <= self.seq_len <= n, f"in [3, model.max_seq_len = {n}]"),
        }
        for name in ("batch", "steps", "heldout_seqs"):
            rules[name] = (getattr(self, name) >= 1, "a positive integer")
        for name, (ok, rule) in rules.items():
            if not ok:
                raise ValueError(f"{name} must be {rule}, got {getattr(self, name)!r}")
        for b in self.budgets:
            check_budget(b, self.sinks)


def _zipf(k: int, s: float) -> Tensor:
    """Probabilities ``(k,)`` proportional to ``r^-s``."""
    return (w := torch.arange(1, k + 1, dtype=torch.float64).pow(-s)) / w.sum()


def sample_copy_language(
    table: Tensor, n: int, cfg: StreamingEvalConfig, g: torch.Generator
) -> Tensor:
    """``n`` sequences ``(n, seq_len)``: a successor of ``t - 1``, or ``t - lag``."""
    V, k = table.shape
    zipf = _zipf(k, cfg.zipf)  # (k,)
    tokens = torch.randint(0, V, (n, 1), generator=g)
    for t in range(1, cfg.seq_len):
        r = torch.multinomial(zipf.expand(n, k), 1, generator=g)[:, 0]  # (n,)
        nxt = table[tokens[:, -1], r]  # (n,)
        if t >= cfg.lag:
            copy = torch.rand(n, generator=g) < cfg.p_copy
            nxt = torch.where(copy, tokens[:, t - cfg.lag], nxt)
        tokens = torch.cat((tokens, nxt[:, None]), dim=1)
    return tokens  # (n, seq_len)


def true_nll(table: Tensor, tokens: Tensor, cfg: StreamingEvalConfig) -> float:
    """The floor: mean loss (nats) of the language's own law on tokens ``1 .. T-1``."""
    zipf = _zipf(table.shape[1], cfg.zipf)
    nxt = tokens[:, 1:, None]  # (n, T-1, 1)
    p = ((table[tokens[:, :-1]] == nxt).double() * zipf).sum(-1)  # (n, T-1)
    lag = cfg.lag
    copied = (tokens[:, lag:] == tokens[:, :-lag]).double()  # (n, T-lag)
    p[:, lag - 1 :] = (1 - cfg.p_copy) * p[:, lag - 1 :] + cfg.p_copy * copied
    return float(-p.log().mean())


def train_model(
    cfg: StreamingEvalConfig, table: Tensor, g: torch.Generator
) -> Transformer:
    """The model of the measurement, trained on fresh batches of the copy language."""
    sample = partial(sample_copy_language, table, cfg.batch, cfg)
    return train_lm(cfg.model, cfg.steps, cfg.lr, sample, g)


def run_streaming_eval(cfg: StreamingEvalConfig | None = None) -> dict[str, Any]:
    """Train, then decode the held-out set at every budget, window and sinks.

    Returns:
        ``{"config", "floor_nll", "full", "rows", "first_token_mass"}``: the
        held-out loss (nats per token) and perplexity with the full cache; per
        budget and policy its loss and perplexity; per layer the mean attention
        mass on token 0 with the full cache, over queries past ``lag``, beside the
        uniform share ``1 / (t + 1)`` of the same queries.
    """
    cfg = cfg or StreamingEvalConfig()
    g = torch.Generator().manual_seed(cfg.seed)
    table = language_tables(cfg, g)[0]  # (V, k): one successor table
    model = train_model(cfg, table, g)
    heldout = sample_copy_language(table, cfg.heldout_seqs, cfg, g)
    T = cfg.seq_len
    nll, mass = streaming_nll(model, heldout, T, 0)  # a budget of T keeps all
    full = float(nll.mean())
    late = slice(cfg.lag, T - 1)  # queries at positions lag .. T-2
    uniform = sum(1 / (t + 1) for t in range(cfg.lag, T - 1)) / (T - 1 - cfg.lag)
    rows = []
    runs = [(b, s) for b in cfg.budgets for s in (0, cfg.sinks)]
    for budget, sinks in progress.track(runs, "cache budgets"):
        loss = float(streaming_nll(model, heldout, budget, sinks)[0].mean())
        rows.append(
            {"budget": budget, "sinks": sinks, "nll": loss, "ppl": math.exp(loss)}
        )
    return {
        "config": asdict(cfg),
        "floor_nll": true_nll(table, heldout, cfg),
        "full": {"nll": full, "ppl": math.exp(full)},
        "rows": rows,
        "first_token_mass": [float(m) for m in mass[late].mean(0)],
        "uniform_mass": uniform,
    }
