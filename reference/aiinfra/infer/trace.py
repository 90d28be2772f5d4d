"""Request traces and what a server made of them: arrivals, first tokens, finishes.

A serving benchmark replays a *trace*: requests that arrive over time, each with a
prompt of ``prompt`` tokens and a number of tokens to generate. Arrivals here are a
Poisson process of rate ``lambda`` requests per second (independent exponential gaps
of mean ``1 / lambda``), the open-loop load of serving evaluations such as vLLM's
(Kwon et al. 2023, Sec. 6.1), and the lengths are drawn uniformly from
given ranges by a seeded ``numpy.random.Generator``, so a trace is reproducible. A
simulated or real server turns each request into a :class:`Record`: when it was
admitted, when its first output token came (time to first token, TTFT), when its
last one came, and the time per output token after the first (TPOT).
:func:`latency_summary` reduces the records to throughput and percentiles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Request:
    """One request of a trace.

    Args:
        id: its index in the trace.
        arrival: seconds since the trace began.
        prompt: prompt tokens, >= 1.
        output: tokens to generate, >= 1 (the first comes with the prefill).
        cached: prompt tokens whose keys and values are already in the cache
            (a request handed over after its prefill), ``0 <= cached < prompt``.
    """

    id: int
    arrival: float
    prompt: int
    output: int
    cached: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.arrival) and self.arrival >= 0):
            raise ValueError(f"arrival must be finite and >= 0, got {self.arrival!r}")
        for name in ("prompt", "output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.cached, int) or not 0 <= self.cached < self.prompt:
            raise ValueError(
                f"cached must be an int in [0, prompt), got {self.cached!r}"
            )


@dataclass
class Record:
    """What happened to one request (times in seconds since the trace began).

    ``admitted``: its first step began; ``released``: its cache was freed (the end
    of its batch under static batching, ``finish`` otherwise).
    """

    request: Request
    admitted: float = math.nan
    first_token: float = math.nan
    finish: float = math.nan
    released: float = math.nan

    @property
    def ttft(self) -> float:
        """Time to first token: first token minus arrival."""
        return self.first_token - self.request.arrival

    @property
    def tpot(self) -> float:
        """Time per output token after the first; NaN for a one-token output."""
        if self.request.output == 1:
            return math.nan
        return (self.finish - self.first_token) / (self.request.output - 1)


def _check_range(name: str, bounds: tuple[int, int]) -> None:
    low, high = bounds
    for value in (low, high):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be two ints >= 1, got {bounds!r}")
    if low > high:
        raise ValueError(f"{name} must be (low, high) with low <= high, got {bounds!r}")


def poisson_trace(
    n: int,
    rate: float,
    prompt: tuple[int, int],
    output: tuple[int, int],
    seed: int = 0,
) -> list[Request]:
    """``n`` requests with Poisson arrivals and uniform prompt and output lengths.

    Args:
        n: requests, >= 1.
        rate: ``lambda``, mean arrivals per second, > 0.
        prompt: ``(low, high)`` prompt tokens, both included.
        output: ``(low, high)`` generated tokens, both included.
        seed: of the ``numpy.random.Generator``; the same seed, the same trace.

    Returns:
        The requests in order of arrival; the first arrives after one gap.

    Raises:
        ValueError: ``n`` < 1, ``rate`` not a positive finite number, or a range
            that is not ``1 <= low <= high``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a finite number > 0, got {rate!r}")
    _check_range("prompt", prompt)
    _check_range("output", output)
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))  # (n,) seconds
    prompts = rng.integers(prompt[0], prompt[1] + 1, n)
    outputs = rng.integers(output[0], output[1] + 1, n)
    return [
        Request(i, float(a), int(p), int(o))
        for i, (a, p, o) in enumerate(zip(arrivals, prompts, outputs, strict=True))
    ]


def latency_summary(records: Sequence[Record]) -> dict[str, float]:
    """Throughput and TTFT/TPOT percentiles of finished requests.

    Args:
        records: one per request, all finished.

    Returns:
        ``requests``, ``output_tokens``, ``duration`` (first arrival to last
        finish, s), ``throughput`` (output tokens/s), ``request_rate``
        (requests/s), ``ttft_mean``, ``ttft_p50``, ``ttft_p99``, ``tpot_p50``,
        ``tpot_p99`` (s; TPOT over the requests with two or more output tokens,
        NaN if none); percentiles interpolate linearly (numpy's default).

    Raises:
        ValueError: no records, or a request that did not finish.
    """
    if not records:
        raise ValueError("records must not be empty")
    if any(not math.isfinite(r.finish) for r in records):
        raise ValueError("records must all be finished (finite finish times)")
    start = min(r.request.arrival for r in records)
    duration = max(r.finish for r in records) - start
    tokens = sum(r.request.output for r in records)
    ttft = np.array([r.ttft for r in records])
    tpot = np.array([r.tpot for r in records if r.request.output > 1])

    def pct(x: np.ndarray, q: float) -> float:
        return float(np.percentile(x, q)) if x.size else math.nan

    return {
        "requests": len(records),
        "output_tokens": tokens,
        "duration": duration,
        "throughput": tokens / duration,
        "request_rate": len(records) / duration,
        "ttft_mean": float(ttft.mean()),
        "ttft_p50": pct(ttft, 50),
        "ttft_p99": pct(ttft, 99),
        "tpot_p50": pct(tpot, 50),
        "tpot_p99": pct(tpot, 99),
    }
