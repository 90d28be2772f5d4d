"""Measuring speculative decoding on the CPU: acceptance, tokens per call, speed-up.

A target and a draft :class:`~aiinfra.models.transformer.Transformer` are trained
briefly on the synthetic second-order Markov language of
:mod:`~aiinfra.infer.distill.train` (known structure, nothing downloaded): the target
deeper and wider, the draft one small layer. Then, for each ``k``, the same prompts
are decoded at temperature 1 by plain KV-cached sampling with the target and by
:func:`~aiinfra.infer.speculative.cached.speculative_generate_cached`, the two in
turn within each repeat so that a busy machine slows both alike. Recorded per ``k``:
drafted and accepted tokens, target calls, wall-clock seconds, and the acceptance rate
``alpha`` (the mean of ``sum_x min(p, q)`` over the positions decoded, with
:func:`~aiinfra.infer.speculative.decoding.acceptance_rate`). One forward pass of each
model is timed too (the draft on 1 token, the target on 1 and on ``k + 1``), which gives
the cost ratio ``c`` of Leviathan et al. 2023 (Sec. 3.3).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from aiinfra import progress
from aiinfra.infer.distill.train import (
    DistillRunConfig,
    markov_language,
    sample_sequences,
    train,
)
from aiinfra.infer.speculative.cached import speculative_generate_cached
from aiinfra.infer.speculative.decoding import _law, acceptance_rate
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.timing import note_spread

SEQ_LEN = 32  # tokens per training sequence


@dataclass(frozen=True)
class SpeculativeBenchConfig:
    """The two models, their training, and what is decoded and timed.

    Raises:
        ValueError: a size, count or ``k`` < 1, or ``temperature`` <= 0.
    """

    vocab: int = 32  # V of the synthetic language
    target_width: int = 128  # h of the target
    target_layers: int = 4
    draft_width: int = 32  # h of the draft
    draft_layers: int = 1
    train_seqs: int = 2048  # corpus both models learn from
    target_steps: int = 200
    draft_steps: int = 200
    ks: tuple[int, ...] = (1, 2, 3, 4, 6, 8)  # drafted tokens per target call
    prompts: int = 4  # prompts decoded per repeat (2 tokens each, from the chain)
    new_tokens: int = 48  # tokens generated per prompt
    repeats: int = 2
    temperature: float = 1.0
    threads: int = 1  # intra-op threads of the whole run (a shared machine: 1)
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ks or min(self.ks) < 1:
            raise ValueError(f"ks must be drafted-token counts >= 1, got {self.ks!r}")
        for name in (
            *("vocab", "target_width", "target_layers", "draft_width"),
            *("draft_layers", "train_seqs", "target_steps", "draft_steps"),
            *("prompts", "new_tokens", "repeats", "threads"),
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")


def _model(width: int, layers: int, cfg: SpeculativeBenchConfig) -> Transformer:
    heads = max(1, width // 16)
    d_ff = 8 * width // 3 // 8 * 8  # about (8/3) h, as Llama's SwiGLU
    max_len = max(SEQ_LEN, 2 + cfg.new_tokens + max(cfg.ks))  # training; decoding
    return Transformer(
        TransformerConfig(
            cfg.vocab, width, layers, heads, d_ff=d_ff, max_seq_len=max_len
        )
    )


def train_pair(cfg: SpeculativeBenchConfig) -> tuple[Transformer, Transformer, Tensor]:
    """The trained target and draft, and the language's probabilities ``(V, V, V)``."""
    g = torch.Generator().manual_seed(cfg.seed)
    probs = markov_language(cfg.vocab, 4, 1.5, g)  # distill_train's language
    corpus = sample_sequences(probs, cfg.train_seqs, SEQ_LEN, g)
    heldout = sample_sequences(probs, 64, SEQ_LEN, g)
    with torch.random.fork_rng(devices=[]):  # weights from the seed, global state kept
        torch.random.default_generator.manual_seed(cfg.seed)
        target = _model(cfg.target_width, cfg.target_layers, cfg)
        draft = _model(cfg.draft_width, cfg.draft_layers, cfg)
    run = DistillRunConfig(vocab=cfg.vocab, seq_len=SEQ_LEN, seed=cfg.seed)
    run = DistillRunConfig(**(asdict(run) | {"eval_every": 10**9}))  # no evaluation
    train(target, corpus, heldout, run, cfg.target_steps)
    train(draft, corpus, heldout, run, cfg.draft_steps)
    return target.eval(), draft.eval(), probs


@torch.no_grad()
def sample_cached(
    model: Transformer,
    prompt: Tensor,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator,
) -> Tensor:
    """Plain decoding, the baseline: one cached forward pass per token, sampled."""
    caches = model.new_caches(1, prompt.shape[1] + max_new_tokens)
    logits, out = model(prompt, caches)[:, -1], [prompt]  # (1, V)
    for step in range(max_new_tokens):
        out.append(torch.multinomial(_law(logits, temperature), 1, generator=generator))
        if step + 1 < max_new_tokens:
            logits = model(out[-1], caches)[:, -1]  # (1, V)
    return torch.cat(out, dim=1)  # (1, T + max_new_tokens)


@torch.no_grad()
def mean_acceptance(
    target: Transformer, draft: Transformer, tokens: Tensor, start: int, temp: float
) -> float:
    """``alpha``: the mean of ``sum_x min(p, q)`` at the positions from ``start``."""
    p = _law(target(tokens)[0, start - 1 : -1], temp)  # (n, V)
    q = _law(draft(tokens)[0, start - 1 : -1], temp)  # (n, V)
    return float(acceptance_rate(p, q).mean())


def _best_seconds(fn: Any, repeats: int = 20) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    note_spread(times)
    return min(times)


@torch.no_grad()
def forward_seconds(model: Transformer, prefix: int, tokens: int) -> float:
    """The fastest of 20 cached forward passes of ``tokens`` after ``prefix``."""
    caches = model.new_caches(1, prefix + tokens)
    model(torch.zeros(1, prefix, dtype=torch.long), caches)
    x = torch.zeros(1, tokens, dtype=torch.long)

    def step() -> None:
        for c in caches:
            c.length = prefix  # decode the same positions again
        model(x, caches)

    return _best_seconds(step)


def run_speculative_bench(cfg: SpeculativeBenchConfig | None = None) -> dict[str, Any]:
    """Train the pair, then decode and time plain and speculative sampling per ``k``.

    Args:
        cfg: the experiment (default: the book's).

    Returns:
        ``{"config", "forward_ms", "baseline", "rows"}``: ``forward_ms`` holds the
        draft's and the target's one-token passes and the target's ``k + 1``-token
        passes; ``baseline`` the plain decode's seconds; each row ``k``, target
        calls, drafted, accepted, emitted tokens, seconds and ``alpha``.
    """
    cfg = cfg or SpeculativeBenchConfig()
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        target, draft, probs = train_pair(cfg)
        g = torch.Generator().manual_seed(cfg.seed + 1)
        prompts = sample_sequences(probs, cfg.prompts, 2, g)  # (prompts, 2)
        mid = 2 + cfg.new_tokens // 2  # a typical cache length while decoding
        forward_ms = {
            "draft_1": 1e3 * forward_seconds(draft, mid, 1),
            "target_1": 1e3 * forward_seconds(target, mid, 1),
        } | {
            f"target_{k + 1}": 1e3 * forward_seconds(target, mid, k + 1) for k in cfg.ks
        }
        base_s = 0.0
        rows = {
            k: dict.fromkeys(("calls", "drafted", "accepted", "seconds"), 0)
            for k in cfg.ks
        }
        alphas: dict[int, list[float]] = {k: [] for k in cfg.ks}
        for r in progress.track(range(cfg.repeats), "repeats"):
            for i, prompt in enumerate(prompts):
                seed = 1000 * r + i
                start = time.perf_counter()
                sample_cached(
                    target,
                    prompt[None],
                    cfg.new_tokens,
                    cfg.temperature,
                    torch.Generator().manual_seed(seed),
                )
                base_s += time.perf_counter() - start
                for k in cfg.ks:
                    start = time.perf_counter()
                    out = speculative_generate_cached(
                        target,
                        draft,
                        prompt[None],
                        cfg.new_tokens,
                        k,
                        cfg.temperature,
                        torch.Generator().manual_seed(seed),
                    )
                    row = rows[k]
                    row["seconds"] += time.perf_counter() - start
                    row["calls"] += out.target_calls
                    row["drafted"] += out.drafted
                    row["accepted"] += out.accepted
                    alphas[k].append(
                        mean_acceptance(target, draft, out.tokens, 2, cfg.temperature)
                    )
    finally:
        torch.set_num_threads(threads)
    table = [
        {
            "k": k,
            **row,
            "emitted": row["calls"] + row["accepted"],
            "alpha": sum(alphas[k]) / len(alphas[k]),
        }
        for k, row in rows.items()
    ]
    decoded = cfg.repeats * cfg.prompts * cfg.new_tokens
    return {
        "config": asdict(cfg),
        "forward_ms": forward_ms,
        "baseline": {"seconds": base_s, "tokens": decoded},
        "rows": table,
    }
