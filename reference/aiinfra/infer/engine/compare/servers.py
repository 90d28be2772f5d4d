"""Both servers under the same streamed load, each in its own process.

``aiinfra serve`` and ``transformers serve --continuous-batching`` (where FastAPI and
uvicorn are installed) load the same checkpoint with the same pool, block size, token
budget and one thread; :func:`serve_runs` sends the same streamed completions from a
fixed number of clients (:func:`~aiinfra.infer.engine.load.run_load`), alternating the
servers, and keeps each one's best run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from aiinfra.infer.engine.compare.config import SERVERS, CompareConfig
from aiinfra.infer.engine.load import percentile, run_load


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hf_server_missing() -> str | None:
    """Why ``transformers serve`` cannot run here, or ``None`` if it can."""
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"transformers serve needs {' and '.join(missing)}, not installed: pip "
            "install 'transformers[serving]'"
        )
    if shutil.which("transformers", path=str(Path(sys.executable).parent)) is None:
        return "the transformers command is not installed next to this Python"
    return None


@contextlib.contextmanager
def _server(
    which: str, ckpt: Path, cfg: CompareConfig, log: Path
) -> Iterator[tuple[int, str]]:
    """Start one server in its own process; yield its port and model name."""
    port = _free_port()
    env = os.environ | {"OMP_NUM_THREADS": str(cfg.threads), "HF_HUB_OFFLINE": "1"}
    slots = cfg.concurrency
    blocks = -(-cfg.max_seq_len // cfg.block_size) * slots
    if which == "aiinfra serve":
        cmd = [
            *(sys.executable, "-m", "aiinfra.cli", "serve", "--model", str(ckpt)),
            *("--port", str(port), "--max-num-seqs", str(slots)),
            *("--num-blocks", str(blocks), "--block-size", str(cfg.block_size)),
            *("--max-num-batched-tokens", str(cfg.token_budget)),
            "--no-prefix-caching",
        ]
        health = f"http://127.0.0.1:{port}/v1/models"
    else:
        exe = shutil.which("transformers", path=str(Path(sys.executable).parent))
        cmd = [
            *(str(exe), "serve", "--continuous-batching", "--device", "cpu"),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--cb-block-size", str(cfg.block_size), "--cb-num-blocks", str(blocks)),
            *("--cb-max-batch-tokens", str(cfg.token_budget), str(ckpt)),
        ]
        health = f"http://127.0.0.1:{port}/health"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{which} exited with {proc.returncode}: {log.read_text()[-500:]}"
                )
            try:
                with urllib.request.urlopen(health, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{which} did not start within 180 s")
            time.sleep(0.5)
        yield port, str(ckpt)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def serve_runs(
    cfg: CompareConfig,
    ckpt: Path,
    prompts: Sequence[list[int]],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Both servers, alternated ``repeats`` times; the best run of each."""
    missing = hf_server_missing()
    names = [s for s in SERVERS if s == "aiinfra serve" or missing is None]
    best: dict[str, dict[str, Any]] = {}
    texts: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(cfg.repeats):
            for which in names:
                progress(f"server: {which}, repeat {r + 1}/{cfg.repeats}")
                with _server(which, ckpt, cfg, Path(tmp) / "server.log") as (port, m):
                    bodies = [
                        {
                            "model": m,
                            "prompt": bytes(p).decode("ascii"),
                            "max_tokens": cfg.server_max_tokens,
                            "temperature": 0,
                        }
                        for p in prompts
                    ]
                    warm = bodies[: min(4, len(bodies))]
                    run_load("127.0.0.1", port, warm, (len(warm),), deadline_s=300)
                    load = os.getloadavg()[0]
                    records, seconds = run_load(
                        "127.0.0.1",
                        port,
                        bodies,
                        (cfg.concurrency,),
                        deadline_s=1800,
                    )
                done = [x for x in records if x is not None]
                ok = [x for x in done if x.ok]
                ttft = [x.ttft_s for x in ok if x.ttft_s is not None]
                tpot = [
                    (x.latency_s - x.ttft_s) / (x.tokens - 1)
                    for x in ok
                    if x.ttft_s is not None and x.tokens > 1
                ]
                tokens = sum(x.tokens for x in ok)
                run = {
                    "requests": len(bodies),
                    "failed": len(bodies) - len(ok),
                    "seconds": seconds,
                    "tokens": tokens,
                    "tokens_per_s": tokens / seconds,
                    "ttft_p50_s": percentile(ttft, 50) if ttft else None,
                    "ttft_p99_s": percentile(ttft, 99) if ttft else None,
                    "tpot_mean_s": sum(tpot) / len(tpot) if tpot else None,
                    "load": load,
                }
                if (
                    which not in best
                    or run["tokens_per_s"] > best[which]["tokens_per_s"]
                ):
                    best[which] = run
                texts[which] = [x.text if x is not None else "" for x in records]
    out: dict[str, Any] = {"skipped": missing, "runs": best}
    if len(texts) == 2:
        ours, theirs = texts["aiinfra serve"], texts["transformers serve"]
        out["same_text"] = ours == theirs
        out["differing_texts"] = sum(a != b for a, b in zip(ours, theirs, strict=True))
        # A stream that holds back bytes that may start a UTF-8 character, and never
        # flushes them, ends without the U+FFFD of its last invalid bytes.
        out["differing_before_the_end"] = sum(
            a.rstrip("\ufffd") != b.rstrip("\ufffd")
            for a, b in zip(ours, theirs, strict=True)
        )
    out["texts"] = texts.get("aiinfra serve", [])
    return out
