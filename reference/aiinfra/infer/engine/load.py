"""A load generator for OpenAI-compatible servers: streamed completions, timed.

:func:`stream_completion` sends one streamed request over a raw HTTP connection and
times it (time to the first streamed text, TTFT; the whole request); :func:`run_load`
sends many at a fixed number of concurrent clients, or ramps that number stage by
stage (1, 2, 4, ... 256), always bounded in count and in time: a stage starts only
before the deadline, and a request left unsent is reported, never silently dropped.
Only loopback addresses are allowed as targets.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from aiinfra.infer.engine.server import LOCAL_HOSTS

__all__ = ["Record", "percentile", "rss_bytes", "run_load", "stream_completion"]

# The suite's load test: streams at once, stage by stage, and the requests sent.
RAMP = (1, 2, 4, 8, 16, 32, 64, 128, 256)
RAMP_REQUESTS = 2000


@dataclass(frozen=True)
class Record:
    """One request as the client saw it.

    ``ok``: a 200 whose stream ended with ``[DONE]`` or a ``finish_reason``
    (``transformers serve`` sends no ``[DONE]``) and no error event; ``status``: the
    HTTP status (``None`` when the connection failed); ``ttft_s``: seconds to the
    first streamed text; ``latency_s``: to the end; ``chunks``: events with text;
    ``text``: the streamed text; ``error``: what went wrong; ``tokens``: the
    completion tokens of the final ``usage`` (0 if none was sent).
    """

    ok: bool
    status: int | None
    ttft_s: float | None
    latency_s: float
    chunks: int
    text: str
    error: str | None
    concurrency: int = 1
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The record as a dict (JSON)."""
        return asdict(self)


def _check_host(host: str) -> None:
    if host not in LOCAL_HOSTS and not host.startswith("127."):
        raise ValueError(f"host must be a loopback address, got {host!r}")


def stream_completion(
    host: str,
    port: int,
    body: dict[str, Any],
    *,
    path: str = "/v1/completions",
    api_key: str | None = None,
    timeout: float = 120.0,
    concurrency: int = 1,
) -> Record:
    """Send ``body`` with ``"stream": true`` and read the Server-Sent Events.

    Raises:
        ValueError: ``host`` is not a loopback address.
    """
    _check_host(host)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body | {"stream": True}).encode()
    start = time.perf_counter()
    ttft, pieces, status, tokens = None, [], None, 0
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("POST", path, data, headers)
        resp = conn.getresponse()
        status = resp.status
        if status != 200:
            detail = resp.read()[:200].decode("utf-8", "replace")
            return Record(
                False,
                status,
                None,
                time.perf_counter() - start,
                0,
                "",
                f"HTTP {status}: {detail}",
                concurrency,
            )
        done, finished, tokens = False, False, 0
        for raw in resp:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            event = json.loads(payload)
            if "error" in event:
                return Record(
                    False,
                    status,
                    ttft,
                    time.perf_counter() - start,
                    len(pieces),
                    "".join(pieces),
                    str(event["error"].get("message")),
                    concurrency,
                )
            choice = (event.get("choices") or [{}])[0]
            finished = finished or choice.get("finish_reason") is not None
            tokens = (event.get("usage") or {}).get("completion_tokens") or tokens
            text = choice.get("text")
            if text is None:
                text = (choice.get("delta") or {}).get("content") or ""
            if text:
                if ttft is None:
                    ttft = time.perf_counter() - start
                pieces.append(text)
        ok = done or finished
        error = None if ok else "the stream ended without [DONE] or a finish_reason"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        ok, error = False, f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return Record(
        ok,
        status,
        ttft,
        time.perf_counter() - start,
        len(pieces),
        "".join(pieces),
        error,
        concurrency,
        tokens,
    )


def run_load(
    host: str,
    port: int,
    bodies: Sequence[dict[str, Any]],
    stages: Sequence[int],
    *,
    deadline_s: float = 600.0,
    path: str = "/v1/completions",
    api_key: str | None = None,
    timeout: float = 120.0,
) -> tuple[list[Record | None], float]:
    """Send ``bodies`` in stages of concurrent clients; their records and seconds.

    The requests are split over ``stages`` (one concurrency each, e.g. ``1, 2, 4``)
    in proportion to the concurrency, so each stage keeps its clients busy; inside a
    stage, ``c`` client threads each send their next request as soon as the last one
    ends. A stage starts only before ``deadline_s``; requests of stages not started
    are ``None``.

    Raises:
        ValueError: ``host`` is not a loopback address, a stage is < 1, or there
            are fewer requests than stages.
    """
    _check_host(host)
    if not stages or min(stages) < 1:
        raise ValueError(f"stages must be concurrencies >= 1, got {list(stages)}")
    if len(bodies) < len(stages):
        raise ValueError(
            f"bodies must hold at least one request per stage ({len(stages)}), "
            f"got {len(bodies)}"
        )
    weights = [float(c) for c in stages]
    counts = [max(1, int(len(bodies) * w / sum(weights))) for w in weights]
    counts[-1] = len(bodies) - sum(counts[:-1])
    records: list[Record | None] = [None] * len(bodies)
    start = time.perf_counter()
    first = 0
    for c, n in zip(stages, counts, strict=True):
        if time.perf_counter() - start > deadline_s:
            break
        todo = iter(range(first, first + n))
        lock = threading.Lock()

        def client(c: int = c, todo: Any = todo, lock: threading.Lock = lock) -> None:
            while time.perf_counter() - start <= deadline_s:
                with lock:
                    i = next(todo, None)
                if i is None:
                    return
                records[i] = stream_completion(
                    host,
                    port,
                    bodies[i],
                    path=path,
                    api_key=api_key,
                    timeout=timeout,
                    concurrency=c,
                )

        with ThreadPoolExecutor(max_workers=c) as pool:
            for f in [pool.submit(client) for _ in range(c)]:
                f.result()
        first += n
    return records, time.perf_counter() - start


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) by linear interpolation, as numpy's default.

    Raises:
        ValueError: no values, or ``q`` outside [0, 100].
    """
    if not values:
        raise ValueError("values must not be empty")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    v = sorted(values)
    x = (len(v) - 1) * q / 100
    lo = int(x)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (x - lo)


def rss_bytes(pid: int | None = None) -> int:
    """Resident memory of a process (default: this one), bytes; Linux ``/proc``."""
    with open(f"/proc/{pid or os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
