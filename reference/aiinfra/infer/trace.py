"""Request traces and what a server made of them: arrivals, first tokens, finishes.

A serving benchmark replays a *trace*: requests that arrive over time, each with a
prompt of ``prompt`` tokens and a number of tokens to generate. Arrivals here are a
Poisson process of rate ``lambda`` requests per second (independent exponential gaps
of mean ``1 / lambda``), the open-loop load of serving evaluations such as vLLM's
(Kwon et al. 2023, Sec. 6.1), and the lengths are drawn uniformly from
given ranges by a seeded ``numpy.random.Generator``, so a trace is reproducible. A
simulated or real server turns each request into a :class:`Record`: when it was
admitted, when each of its output tokens came and when its cache was freed. A
record is a :class:`~aiinfra.infer.metrics.RequestRecord`, so its time to first
token (TTFT) and time per output token (TPOT) are those of
:mod:`aiinfra.infer.metrics`, and :func:`latency_summary` is that module's
:func:`~aiinfra.infer.metrics.summarize` as one flat dictionary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import fmean

import numpy as np

from aiinfra import checks
from aiinfra.infer.metrics import RequestRecord, summarize


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
            checks.positive_int(name, value)
        if not isinstance(self.cached, int) or not 0 <= self.cached < self.prompt:
            raise ValueError(
                f"cached must be an int in [0, prompt), got {self.cached!r}"
            )


@dataclass(frozen=True)
class Record(RequestRecord):
    """What a server made of one request: its token times and when it held a slot.

    A :class:`~aiinfra.infer.metrics.RequestRecord` (its arrival is the request's),
    so TTFT, TPOT and every metric of :mod:`aiinfra.infer.metrics` apply to it.

    Args:
        token_times: when each of the request's ``output`` tokens came out, in
            seconds since the trace began.
        request: the request served.
        admitted: when its first step began.
        released: when its cache was freed: the end of its batch under static
            batching, its last token otherwise.

    Raises:
        TypeError: ``request`` is not a :class:`Request`; and as ``RequestRecord``.
        ValueError: not ``request.output`` token times, ``admitted`` outside
            ``[arrival, first_token]``, ``released`` before ``finish``; and as
            ``RequestRecord``.
    """

    arrival: float = field(init=False)
    request: Request
    admitted: float
    released: float

    def __post_init__(self) -> None:
        if not isinstance(self.request, Request):
            raise TypeError(f"request must be a Request, got {self.request!r}")
        object.__setattr__(self, "arrival", self.request.arrival)
        super().__post_init__()
        if self.output_tokens != self.request.output:
            raise ValueError(
                f"token_times must hold request.output = {self.request.output} "
                f"times, got {self.output_tokens}"
            )
        if not self.arrival <= self.admitted <= self.first_token:
            raise ValueError(
                f"admitted = {self.admitted} s must lie between arrival = "
                f"{self.arrival} s and the first token at {self.first_token} s"
            )
        if self.released < self.finish:
            raise ValueError(
                f"released = {self.released} s is before the last token at "
                f"{self.finish} s"
            )

    @property
    def first_token(self) -> float:
        """When its first token came out (the end of its prefill)."""
        return self.token_times[0]

    @property
    def finish(self) -> float:
        """When its last token came out."""
        return self.token_times[-1]


def _check_range(name: str, bounds: tuple[int, int]) -> None:
    low, high = bounds
    for value in (low, high):
        checks.positive_int(name, value)
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
    checks.positive_int("n", n)
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


def latency_summary(records: Sequence[RequestRecord]) -> dict[str, float]:
    """Throughput and TTFT/TPOT percentiles of a run, as one flat dictionary.

    :func:`~aiinfra.infer.metrics.summarize` at the 50th and 99th percentiles,
    plus the mean TTFT.

    Args:
        records: one per request (a :class:`Record` or any ``RequestRecord``).

    Returns:
        ``requests``, ``output_tokens``, ``duration`` (first arrival to last
        token, s), ``throughput`` (output tokens/s), ``request_rate``
        (requests/s), ``ttft_mean``, ``ttft_p50``, ``ttft_p99``, ``tpot_p50``,
        ``tpot_p99`` (s; TPOT over the requests with two or more output tokens).

    Raises:
        TypeError, ValueError: as :func:`~aiinfra.infer.metrics.summarize`.
    """
    m = summarize(records, (50, 99))
    return {
        "requests": m.requests,
        "output_tokens": m.output_tokens,
        "duration": m.duration,
        "throughput": m.throughput,
        "request_rate": m.request_rate,
        "ttft_mean": fmean(r.ttft for r in records),
        "ttft_p50": m.ttft[50],
        "ttft_p99": m.ttft[99],
        "tpot_p50": m.tpot[50],
        "tpot_p99": m.tpot[99],
    }
