"""One comparison, start to end: :func:`run_compare` and the speed-ups it shows."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from aiinfra.infer.engine.compare.config import (
    SYSTEMS,
    CompareConfig,
    build_checkpoint,
    workload,
)
from aiinfra.infer.engine.compare.offline import offline, run_engine, run_generate
from aiinfra.infer.engine.compare.profile import profile_engine
from aiinfra.infer.engine.compare.servers import serve_runs
from aiinfra.models.transformer import Transformer


def run_compare(
    cfg: CompareConfig, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Build the checkpoint, run every path and server; the results body.

    Returns:
        ``config``; ``equal``: per batch size, each system's best tokens/s (wall
        and CPU), its runs and whether its tokens equal the engine's; ``vary``: the
        same for the varying regime; ``servers``: per server its best run
        (failures, tokens/s, TTFT p50/p99, mean time per token) and whether the two
        servers streamed the same text; ``same_tokens``: all of it agreed;
        ``profile``: the engine's decode step, ms per category; ``versions``.
    """
    import transformers

    say = progress or (lambda message: None)
    w = workload(cfg)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            say("building the checkpoint")
            ckpt = build_checkpoint(cfg, Path(tmp) / "checkpoint")
            model = Transformer.from_pretrained(ckpt).eval()
            hf = transformers.LlamaForCausalLM.from_pretrained(ckpt).eval()
            run_engine(model, cfg, w["equal"][:2], [4, 4], 2)  # warm-up
            run_generate(hf, w["equal"][:2], [4, 4], 2)
            equal = {}
            for b in cfg.batches:
                equal[str(b)] = offline(
                    cfg,
                    model,
                    hf,
                    w["equal"][:b],
                    [cfg.output_len] * b,
                    b,
                    say,
                    f"equal lengths, batch {b}",
                )
            top = max(cfg.batches)
            vary = offline(
                cfg,
                model,
                hf,
                w["vary"],
                w["vary_lengths"],
                top,
                say,
                "varying lengths",
            )
            say(f"profiling the engine's decode step at {top} sequences")
            prof = profile_engine(model, cfg, w["equal"], top)
            servers = (
                serve_runs(cfg, ckpt, w["server"], say)
                if cfg.servers
                else {"skipped": "not asked (servers off)", "runs": {}}
            )
            if cfg.servers:
                alone = run_engine(
                    model,
                    cfg,
                    w["server"],
                    [cfg.server_max_tokens] * len(w["server"]),
                    cfg.concurrency,
                )
                decoded = [bytes(t).decode("utf-8", "replace") for t in alone]
                servers["same_as_offline"] = servers.pop("texts") == decoded
            else:
                servers.pop("texts", None)
    finally:
        torch.set_num_threads(threads)
    offline_same = all(
        row[s]["same_tokens"] for row in [*equal.values(), vary] for s in SYSTEMS
    )
    return {
        "config": asdict(cfg) | {"dtype": "float32", "max_seq_len": cfg.max_seq_len},
        "equal": equal,
        "vary": vary,
        "servers": servers,
        "same_tokens": offline_same
        and servers.get("same_text", True)
        and servers.get("same_as_offline", True),
        "profile": prof,
        "versions": _versions(),
    }


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("transformers", "fastapi", "uvicorn", "openai"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def speedups(res: dict[str, Any]) -> dict[str, float]:
    """The engine's throughput over each system's, per regime and batch.

    Keys ``"generate@8"``, ``"generate_batch@vary"``, ...
    """
    out = {}
    rows = [*((b, r) for b, r in res["equal"].items()), ("vary", res["vary"])]
    for key, row in rows:
        for s in SYSTEMS[1:]:
            out[f"{s}@{key}"] = row["engine"]["tokens_per_s"] / row[s]["tokens_per_s"]
    return out
