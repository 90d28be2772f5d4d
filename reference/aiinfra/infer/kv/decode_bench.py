"""Timing greedy decoding with and without the KV cache (``aiinfra bench decode``).

One model, one prompt, two loops that produce the same tokens: the cached loop of
:func:`~aiinfra.models.transformer.generate_greedy` (prefill once, then one position
per step) and :func:`~aiinfra.infer.kv.decode.generate_recompute`'s (the whole prefix
every step). Each step is timed on its own, so the file holds the time of every
generated token, and the speed-up after ``n`` tokens is the ratio of the cumulative
times. The two loops alternate over the repeats and each step keeps its fastest
repeat (the least disturbed on a shared machine). ``aiinfra bench decode --stamp``
stores the result as ``docs/_data/bench/decode-cpu.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from aiinfra import checks, progress, results
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer, generate_greedy
from aiinfra.report import Table
from aiinfra.timing import note_spread

_SIZES = (
    *("d_model", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "prompt_len"),
    *("new_tokens", "batch", "repeats", "threads"),
)


@dataclass(frozen=True)
class DecodeBenchConfig:
    """The timed model and run (fp32 on the CPU).

    Raises:
        ValueError: a size < 1, or ``report_at`` outside ``1..new_tokens``.
    """

    d_model: int = 256  # h
    n_layers: int = 4  # L
    n_heads: int = 8  # H
    n_kv_heads: int = 2  # G
    vocab_size: int = 256  # V: bytes
    prompt_len: int = 16  # T_0
    new_tokens: int = 512
    batch: int = 1  # B
    repeats: int = 3
    threads: int = 1  # intra-op threads while timing (a shared machine: 1)
    report_at: tuple[int, ...] = (32, 64, 128, 256, 512)

    def __post_init__(self) -> None:
        for name in _SIZES:
            value = getattr(self, name)
            checks.positive_int(name, value)
        if not self.report_at or not all(
            1 <= n <= self.new_tokens for n in self.report_at
        ):
            raise ValueError(
                f"report_at must be token counts in 1..new_tokens ({self.new_tokens}),"
                f" got {self.report_at!r}"
            )

    def model_config(self) -> TransformerConfig:
        """The timed Transformer (SwiGLU width about ``8h/3``, as Llama)."""
        return TransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            d_ff=(8 * self.d_model // 3 + 63) // 64 * 64,
            max_seq_len=self.prompt_len + self.new_tokens,
        )


def _timed_cached(model: Transformer, prompt: torch.Tensor, n: int) -> tuple:
    """The cached loop of ``generate_greedy``, each step timed: (tokens, seconds)."""
    B, T0 = prompt.shape
    seconds = []
    start = time.perf_counter()
    caches = model.new_caches(B, T0 + n)
    logits = model(prompt, caches)  # (B, T0, V): the prefill
    tokens = [prompt]
    for step in range(n):
        tokens.append(logits[:, -1].argmax(-1, keepdim=True))  # (B, 1)
        now = time.perf_counter()
        seconds.append(now - start)  # token `step` exists now
        start = now
        if step + 1 < n:
            logits = model(tokens[-1], caches)  # (B, 1, V)
    return torch.cat(tokens, dim=1), seconds


def _timed_recompute(model: Transformer, prompt: torch.Tensor, n: int) -> tuple:
    """The loop of ``generate_recompute``, each step timed: (tokens, seconds)."""
    tokens, seconds = prompt, []
    for _ in range(n):
        start = time.perf_counter()
        logits = model(tokens)  # (B, T0 + t, V)
        tokens = torch.cat([tokens, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        seconds.append(time.perf_counter() - start)
    return tokens, seconds


def run_bench(
    cfg: DecodeBenchConfig, generator: torch.Generator | None = None
) -> dict[str, Any]:
    """Time every generated token of both loops; ``{"config", "cached", ...}``.

    Args:
        cfg: what to time.
        generator: for the weights and the prompt (default: seeded with 0).

    Returns:
        ``cached_s`` and ``recompute_s``: seconds of each generated token (the
        first includes the prefill, or the first full forward pass), fastest over
        the repeats; ``same_tokens``: both loops, and ``generate_greedy``, gave
        the same tokens.
    """
    g = generator or torch.Generator().manual_seed(0)
    model = Transformer(cfg.model_config()).eval()
    with torch.no_grad():
        for p in model.parameters():  # random but not tiny: varied argmax tokens
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 / p.shape[-1] ** 0.5)
    prompt = torch.randint(cfg.vocab_size, (cfg.batch, cfg.prompt_len), generator=g)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    best = {"cached": [float("inf")] * cfg.new_tokens}
    best["recompute"] = list(best["cached"])
    outputs: dict[str, Any] = {}
    totals: dict[str, list[float]] = {"cached": [], "recompute": []}
    try:
        with torch.no_grad():
            _timed_cached(model, prompt, 4)  # warm-up
            for _ in progress.track(range(cfg.repeats), "repeats"):
                for name, loop in (
                    ("cached", _timed_cached),
                    ("recompute", _timed_recompute),
                ):
                    outputs[name], seconds = loop(model, prompt, cfg.new_tokens)
                    totals[name].append(sum(seconds))
                    best[name] = [
                        min(a, b) for a, b in zip(best[name], seconds, strict=True)
                    ]
            reference = generate_greedy(model, prompt, cfg.new_tokens)
    finally:
        torch.set_num_threads(threads)
    for seconds in totals.values():
        note_spread(seconds)
    same = all(torch.equal(t, reference) for t in outputs.values())
    return {
        "config": asdict(cfg) | {"dtype": "float32"},
        "same_tokens": same,
        "cached_s": best["cached"],
        "recompute_s": best["recompute"],
    }


def speedup(res: dict[str, Any], n: int) -> float:
    """How many times faster the cached loop made the first ``n`` tokens.

    Raises:
        ValueError: ``n`` outside ``1..new_tokens``.
    """
    if not 1 <= n <= len(res["cached_s"]):
        raise ValueError(f"n must be in 1..{len(res['cached_s'])}, got {n}")
    return sum(res["recompute_s"][:n]) / sum(res["cached_s"][:n])


def decode_bench_table(res: dict[str, Any]) -> Table:
    """Tokens/s of both loops after ``n`` generated tokens, and the speed-up."""
    rows = []
    for n in res["config"]["report_at"]:
        cached, recompute = sum(res["cached_s"][:n]), sum(res["recompute_s"][:n])
        rows.append(
            [
                n,
                round(n / recompute, 1),
                round(n / cached, 1),
                round(speedup(res, n), 1),
            ]
        )
    st, c = res["stamp"], res["config"]
    note = (
        "Greedy decoding of one prompt; tokens/s over the first n generated tokens, "
        "prefill included; fastest of the repeats for each token."
    )
    stamp = (
        f"h = {c['d_model']}, L = {c['n_layers']}, H = {c['n_heads']}, "
        f"G = {c['n_kv_heads']}, T_0 = {c['prompt_len']}, B = {c['batch']}, fp32; "
        f"{_plural(c['repeats'], 'repeat')}, {_plural(c['threads'], 'thread')} on "
        f"{results.machine_label(st)}; torch {st['torch']}; {st['date']}"
    )
    return Table(
        ["n", "recompute (tokens/s)", "KV cache (tokens/s)", "speed-up"],
        rows,
        note,
        stamp,
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
