"""The comparison's tables: offline paths, servers, the engine's step profile."""

from __future__ import annotations

from typing import Any

from aiinfra.infer.engine.compare.config import SERVERS, SYSTEMS
from aiinfra.report import Table


def _stamp(res: dict[str, Any]) -> str:
    st, c = res["stamp"], res["config"]
    return (
        f"Llama h = {c['d_model']}, L = {c['n_layers']}, H = {c['n_heads']}, "
        f"G = {c['n_kv_heads']}, d_ff = {c['d_ff']}, V = 256, fp32; prompts "
        f"{c['prompt_min']}-{c['prompt_max']} tokens; best of {c['repeats']}, "
        f"{c['threads']} thread(s) on {st['cpu']} ({st['cpu_count']} cores, load "
        f"{st['load_1min']}); transformers {res['versions']['transformers']}, torch "
        f"{st['torch']}; {st['date']}"
    )


def offline_table(res: dict[str, Any]) -> Table:
    """Generated tokens/s of the three offline paths, per regime and batch."""
    rows = []
    for key, row in [*res["equal"].items(), ("vary", res["vary"])]:
        rows.append(
            [
                "varying" if key == "vary" else "equal",
                row["slots"],
                row["requests"],
                *(round(row[s]["tokens_per_s"]) for s in SYSTEMS),
                round(
                    row["engine"]["tokens_per_s"] / row["generate"]["tokens_per_s"], 2
                ),
                round(
                    row["engine"]["cpu_tokens_per_s"]
                    / row["generate"]["cpu_tokens_per_s"],
                    2,
                ),
                "yes" if all(row[s]["same_tokens"] for s in SYSTEMS) else "no",
            ]
        )
    c = res["config"]
    note = (
        "Generated tokens per second, greedy, no EOS; slots: sequences at once. The "
        "engine and transformers' continuous batching share the KV pool, block size "
        "and token budget; padded generate runs batches of the slot count, each to "
        "its longest request. Tokens/s by wall time, the best run; the ratio is "
        "also given by the process's CPU time, which a busy machine disturbs less. "
        "Same tokens: every path gave every request the engine's tokens."
    )
    stamp = (
        f"equal: {c['output_len']} tokens per request; varying: "
        f"{c['vary_min']}-{c['vary_max']} tokens, uniform; " + _stamp(res)
    )
    return Table(
        [
            "output lengths",
            "slots",
            "requests",
            "engine",
            "generate_batch",
            "padded generate",
            "engine / generate (wall)",
            "engine / generate (CPU)",
            "same tokens",
        ],
        rows,
        note,
        stamp,
        words=(0, 8),
    )


def server_table(res: dict[str, Any]) -> Table:
    """The two servers under the same streamed load, from the client."""
    c, rows = res["config"], []
    for name in SERVERS:
        run = res["servers"]["runs"].get(name)
        if run is None:
            continue
        rows.append(
            [
                name,
                f"{run['failed']} / {run['requests']}",
                round(run["tokens_per_s"]),
                round(1e3 * run["ttft_p50_s"]),
                round(1e3 * run["ttft_p99_s"]),
                round(1e3 * run["tpot_mean_s"], 1),
            ]
        )
    note = (
        "Streamed /v1/completions, greedy, each server in its own process with one "
        "thread; TTFT and time per output token measured by the client."
    )
    stamp = (
        f"{c['server_requests']} requests of {c['server_max_tokens']} tokens from "
        f"{c['concurrency']} concurrent clients; " + _stamp(res)
    )
    return Table(
        [
            "server",
            "failed",
            "tokens/s",
            "TTFT p50 (ms)",
            "TTFT p99 (ms)",
            "ms per token",
        ],
        rows,
        note,
        stamp,
        words=(),
    )


PROFILE_PARTS = (
    "schedule",
    "pack",
    "matmuls",
    "paged gather and write",
    "attention kernel (SDPA)",
    "other operators",
    "Python and dispatch",
    "sample",
    "engine bookkeeping",
)


def profile_table(res: dict[str, Any]) -> Table:
    """Where the engine's decode step goes at the largest batch, ms per step."""
    p, c = res["profile"], res["config"]
    rows = [[k, round(p[k], 2), round(100 * p[k] / p["step"])] for k in PROFILE_PARTS]
    note = (
        "One decode step of the engine: the scheduler, the packing of the step's "
        "index tensors, the sampling and the rest of the step timed by a clock; the "
        "forward pass split by the torch profiler's operator times."
    )
    stamp = (
        f"{max(c['batches'])} sequences, {c['profile_steps']} steps, "
        f"{p['step']:.2f} ms a step; " + _stamp(res)
    )
    return Table(["part", "ms per step", "% of the step"], rows, note, stamp)
