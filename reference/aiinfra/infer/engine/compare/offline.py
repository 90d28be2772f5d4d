"""The three offline paths on the same prompts, timed and compared token by token.

The engine (every request queued at once, ``slots`` at a time), transformers'
continuous batching (its manager, given the engine's KV pool, block size and token
budget) and transformers' padded ``generate`` (left-padded batches of ``slots``, each
run to its longest request). :func:`offline` runs each ``repeats`` times, alternated,
and keeps the best wall time.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from aiinfra.infer.engine.compare.config import CompareConfig
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.models.transformer import Transformer


class Timer:
    """Wall and process CPU seconds of a block."""

    def __enter__(self) -> Timer:
        self.load = os.getloadavg()[0]
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = time.process_time() - self._cpu


def run_engine(
    model: Transformer,
    cfg: CompareConfig,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
) -> list[list[int]]:
    """The engine, ``slots`` sequences at once, every request queued at the start."""
    blocks = -(-cfg.max_seq_len // cfg.block_size) * slots
    engine = Engine(
        model,
        num_blocks=blocks,
        block_size=cfg.block_size,
        max_num_seqs=slots,
        max_num_batched_tokens=cfg.token_budget,
        enable_prefix_caching=False,
    )
    seqs = [
        engine.add_request(p, SamplingParams(max_tokens=n))
        for p, n in zip(prompts, lengths, strict=True)
    ]
    while engine.has_unfinished():
        engine.step()
    return [s.output for s in seqs]


def run_generate(
    hf: Any, prompts: Sequence[list[int]], lengths: Sequence[int], slots: int
) -> list[list[int]]:
    """Padded ``generate``: batches of ``slots`` in order, each to its longest."""
    out = []
    for i in range(0, len(prompts), slots):
        batch, want = prompts[i : i + slots], lengths[i : i + slots]
        T = max(len(p) for p in batch)
        ids = torch.tensor([[0] * (T - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (T - len(p)) + [1] * len(p) for p in batch])
        n = max(want)
        with torch.no_grad():
            gen = hf.generate(
                ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=n,
                min_new_tokens=n,
                pad_token_id=0,
            )
        out += [row[T : T + k] for row, k in zip(gen.tolist(), want, strict=True)]
    return out


def run_generate_batch(
    hf: Any,
    cfg: CompareConfig,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
) -> list[list[int]]:
    """Continuous batching of transformers, with the engine's pool and budget.

    Its defaults on a CPU size the KV pool badly (about 100 tokens/s at 32
    sequences here); given the engine's pool it runs several times faster.
    """
    import transformers

    gen = transformers.GenerationConfig(
        do_sample=False, max_new_tokens=max(lengths), eos_token_id=-1
    )
    cb = transformers.ContinuousBatchingConfig(
        page_size=cfg.block_size,
        num_blocks=-(-cfg.max_seq_len // cfg.block_size) * slots,
        max_batch_tokens=cfg.token_budget,
        max_requests_per_batch=slots,
    )
    with hf.continuous_batching_context_manager(
        generation_config=gen, continuous_batching_config=cb, warmup=False
    ) as manager:
        ids = [
            manager.add_request(p, max_new_tokens=n, eos_token_id=-1)
            for p, n in zip(prompts, lengths, strict=True)
        ]
        results: dict[str, list[int]] = {}
        deadline = time.monotonic() + 3600
        while len(results) < len(ids) and time.monotonic() < deadline:
            r = manager.get_result(timeout=1)
            if r is not None and r.is_finished():
                results[r.request_id] = list(r.generated_tokens)
    return [results.get(i, []) for i in ids]


def offline(
    cfg: CompareConfig,
    model: Transformer,
    hf: Any,
    prompts: Sequence[list[int]],
    lengths: Sequence[int],
    slots: int,
    progress: Callable[[str], None],
    label: str,
) -> dict[str, Any]:
    """Each system ``repeats`` times, alternated; best wall time, tokens compared."""
    runs = {
        "engine": lambda: run_engine(model, cfg, prompts, lengths, slots),
        "generate_batch": lambda: run_generate_batch(hf, cfg, prompts, lengths, slots),
        "generate": lambda: run_generate(hf, prompts, lengths, slots),
    }
    times: dict[str, list[dict[str, float]]] = {k: [] for k in runs}
    outputs: dict[str, list[list[int]]] = {}
    for r in range(cfg.repeats):
        for name, fn in runs.items():
            progress(f"{label}: {name}, repeat {r + 1}/{cfg.repeats}")
            with Timer() as t:
                outputs[name] = fn()
            times[name].append({"wall_s": t.wall, "cpu_s": t.cpu, "load": t.load})
    tokens = sum(lengths)
    row: dict[str, Any] = {"slots": slots, "requests": len(prompts), "tokens": tokens}
    for name in runs:
        best = min(times[name], key=lambda x: x["wall_s"])
        row[name] = {
            "tokens_per_s": tokens / best["wall_s"],
            "cpu_tokens_per_s": tokens / min(x["cpu_s"] for x in times[name]),
            "runs": times[name],
            "same_tokens": outputs[name] == outputs["engine"],
            "mismatches": mismatches(model, prompts, outputs["engine"], outputs[name]),
        }
    return row


def mismatches(
    model: Transformer,
    prompts: Sequence[list[int]],
    ours: Sequence[list[int]],
    theirs: Sequence[list[int]],
) -> list[dict[str, float | None]]:
    """Where two systems' greedy tokens part, and how close the model's call was.

    For each request whose tokens differ: its index, the first generated position
    that differs, and the gap between the two tokens' logits there, computed by the
    engine's model on the common prefix (a gap near fp32 rounding is a tie that
    any two implementations may break differently).
    """
    out = []
    for i, (p, a, b) in enumerate(zip(prompts, ours, theirs, strict=True)):
        if a == b:
            continue
        j = next(
            (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
            min(len(a), len(b)),
        )
        gap = None  # one ended early: no token to compare
        if j < min(len(a), len(b)):
            with torch.no_grad():
                logits = model(torch.tensor([p + a[:j]]))[0, -1]  # (V,)
            gap = float(logits[a[j]] - logits[b[j]])
        out.append({"request": i, "position": j, "logit_gap": gap})
    return out
