"""Serving metrics: TTFT, TPOT, latency, throughput, percentiles and goodput.

A request arrives at time ``a`` and its ``T_o`` output tokens are emitted at
``t_1 <= ... <= t_{T_o}``. What its user waits for is the time to first token,
``TTFT = t_1 - a``, then the time per output token, the mean gap between the later
tokens, ``TPOT = (t_{T_o} - t_1) / (T_o - 1)``, as vLLM's serving benchmark and
DistServe (Zhong et al. 2024, Sec. 2) define them; the latency is ``t_{T_o} - a``.
A run of many requests has a throughput, output tokens per second from the first
arrival to the last token, and percentiles of each latency (p50, p90, p99). Goodput
counts only the requests that meet a service-level objective (SLO), ``TTFT <=
ttft`` and ``TPOT <= tpot``: here, such requests per second of the run; DistServe
reports the highest request rate at which a target share (90 %) of them meet it.
Times are in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aiinfra import checks

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class RequestRecord:
    """When one request arrived and when each of its output tokens came out.

    Args:
        arrival: ``a``, seconds on the run's clock (>= 0).
        token_times: ``t_1 .. t_{T_o}``, one per output token, non-decreasing, none
            before ``arrival``; a list is stored as a tuple.

    Raises:
        TypeError: a time is not a number, or ``token_times`` not a list or tuple.
        ValueError: a time is negative or not finite, ``token_times`` is empty,
            out of order, or starts before ``arrival``.
    """

    arrival: float
    token_times: tuple[float, ...]

    def __post_init__(self) -> None:
        checks.non_negative("arrival", self.arrival)
        times = self.token_times
        if not isinstance(times, list | tuple):
            raise TypeError(f"token_times must be a list or tuple: {times!r}")
        if not times:
            raise ValueError("token_times must hold at least one output token")
        t = np.fromiter(times, float) if all(type(x) is float for x in times) else None
        fast = t is not None and np.isfinite(t).all() and (np.diff(t) >= 0).all()
        if not fast:  # check one by one, to name the culprit
            times = [
                float(checks.non_negative(f"token_times[{i}]", x))
                for i, x in enumerate(times)
            ]
        if times[0] < self.arrival:
            raise ValueError(
                f"token_times[0] = {times[0]} s is before arrival = {self.arrival} s"
            )
        for i in range(1, 1 if fast else len(times)):
            if times[i] < times[i - 1]:
                raise ValueError(
                    f"token_times must be non-decreasing, got token_times[{i}] = "
                    f"{times[i]} s < token_times[{i - 1}] = {times[i - 1]} s"
                )
        object.__setattr__(self, "token_times", tuple(times))

    @property
    def output_tokens(self) -> int:
        """``T_o``, tokens generated."""
        return len(self.token_times)

    @property
    def ttft(self) -> float:
        """Time to first token, ``t_1 - a``."""
        return self.token_times[0] - self.arrival

    @property
    def tpot(self) -> float | None:
        """Time per output token after the first, ``(t_{T_o} - t_1) / (T_o - 1)``.

        ``None`` for a one-token answer, which has no gap (vLLM leaves it out too).
        """
        n = self.output_tokens
        return (
            None if n == 1 else (self.token_times[-1] - self.token_times[0]) / (n - 1)
        )

    @property
    def latency(self) -> float:
        """End-to-end latency, arrival to last token, ``t_{T_o} - a``."""
        return self.token_times[-1] - self.arrival

    @property
    def inter_token_latencies(self) -> tuple[float, ...]:
        """The gaps ``t_{i+1} - t_i``; their mean is :attr:`tpot`."""
        return tuple(np.diff(self.token_times).tolist())


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile, interpolating linearly between sorted values.

    The rank ``(n - 1) q / 100`` of the sorted values, between its two neighbours:
    the rule of ``numpy.percentile``'s default (Hyndman & Fan's type 7).

    Args:
        values: the sample, at least one finite number.
        q: in ``[0, 100]``.

    Raises:
        ValueError: ``values`` is empty or not finite, or ``q`` outside ``[0, 100]``.
    """
    checks.number("q", q, 0, 100)
    xs = sorted(float(v) for v in values)
    if not xs or not all(math.isfinite(x) for x in xs):
        raise ValueError(f"values must be a non-empty sequence of finite numbers: {xs}")
    rank = (len(xs) - 1) * q / 100
    lo, hi = math.floor(rank), min(math.floor(rank) + 1, len(xs) - 1)
    return xs[lo] + (rank - lo) * (xs[hi] - xs[lo])


@dataclass(frozen=True)
class Slo:
    """A service-level objective: the largest TTFT and TPOT a user accepts.

    Args:
        ttft: seconds to the first token (> 0).
        tpot: seconds per later token (> 0).

    Raises:
        TypeError, ValueError: a bound is not a positive finite number.
    """

    ttft: float
    tpot: float

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot"):
            if checks.non_negative(name, getattr(self, name)) == 0:
                raise ValueError(f"{name} must be > 0 s, got 0")

    def met_by(self, record: RequestRecord) -> bool:
        """Whether ``record`` meets both bounds (a one-token answer has no TPOT)."""
        tpot = record.tpot
        return record.ttft <= self.ttft and (tpot is None or tpot <= self.tpot)


def _check_records(records: Sequence[RequestRecord]) -> None:
    if isinstance(records, RequestRecord) or not isinstance(records, Sequence):
        raise TypeError(f"records must be a sequence of RequestRecord, got {records!r}")
    if not records:
        raise ValueError("records must hold at least one request")
    for i, r in enumerate(records):
        if not isinstance(r, RequestRecord):
            raise TypeError(f"records[{i}] must be a RequestRecord, got {r!r}")


def run_duration(records: Sequence[RequestRecord]) -> float:
    """Seconds from the first arrival to the last token of the run.

    Raises:
        TypeError, ValueError: not a non-empty sequence of records, or the run
            lasts 0 s (every token at the instant of the first arrival).
    """
    _check_records(records)
    start = min(r.arrival for r in records)
    duration = max(r.token_times[-1] for r in records) - start
    if duration <= 0:
        raise ValueError("records span 0 s: a rate over the run is undefined")
    return duration


def throughput(records: Sequence[RequestRecord]) -> float:
    """Output tokens per second over the run (:func:`run_duration`)."""
    duration = run_duration(records)  # checks the records first
    return sum(r.output_tokens for r in records) / duration


def slo_attainment(records: Sequence[RequestRecord], slo: Slo) -> float:
    """The share of requests that meet ``slo``, in ``[0, 1]``."""
    _check_records(records)
    return sum(slo.met_by(r) for r in records) / len(records)


def goodput(records: Sequence[RequestRecord], slo: Slo) -> float:
    """Requests per second that meet ``slo``, over the run's duration."""
    duration = run_duration(records)  # checks the records first
    return sum(slo.met_by(r) for r in records) / duration


@dataclass(frozen=True)
class RunMetrics:
    """One run as a serving benchmark reports it.

    Counts, seconds, rates per second, and ``{percentile: seconds}`` of TTFT, TPOT
    (requests of >= 2 tokens) and end-to-end latency.
    """

    requests: int
    output_tokens: int
    duration: float
    throughput: float
    request_rate: float
    ttft: dict[float, float]
    tpot: dict[float, float]
    latency: dict[float, float]


def summarize(
    records: Sequence[RequestRecord], qs: Sequence[float] = PERCENTILES
) -> RunMetrics:
    """Throughput and the percentiles of TTFT, TPOT and latency of a run.

    Raises:
        TypeError, ValueError: as :func:`run_duration`, or a ``q`` outside
            ``[0, 100]``, or no request has two tokens (no TPOT).
    """
    duration = run_duration(records)
    tpots = [r.tpot for r in records if r.tpot is not None]
    if not tpots:
        raise ValueError("records must hold a request of >= 2 tokens to give a TPOT")
    tokens = sum(r.output_tokens for r in records)

    def pcts(values: list[float]) -> dict[float, float]:
        return {q: percentile(values, q) for q in qs}

    return RunMetrics(
        requests=len(records),
        output_tokens=tokens,
        duration=duration,
        throughput=tokens / duration,
        request_rate=len(records) / duration,
        ttft=pcts([r.ttft for r in records]),
        tpot=pcts(tpots),
        latency=pcts([r.latency for r in records]),
    )


@dataclass(frozen=True)
class ServingPoint:
    """A steady state of one server (seconds, tokens/s and requests/s)."""

    batch: int  # B, sequences decoding together
    ttft: float  # seconds to the first token
    tpot: float  # seconds per later token
    throughput: float  # output tokens per second
    request_rate: float  # requests finished (and admitted) per second

    def goodput(self, slo: Slo) -> float:
        """Requests per second meeting ``slo``: all (the model's are all alike) or 0."""
        met = self.ttft <= slo.ttft and self.tpot <= slo.tpot
        return self.request_rate if met else 0.0


def colocated_steady_state(
    batch: int, output_len: int, prefill_s: float, decode_step_s: float
) -> ServingPoint:
    """Prefill and decode on one server, ``B`` sequences always in flight (a model).

    Every request asks for ``T_o`` tokens: its prefill emits the first, ``T_o - 1``
    decode steps the rest. When a sequence finishes, a new request takes its place
    and its prefill runs as a step of its own before the next decode step (no
    chunking). ``m = B / (T_o - 1)`` sequences finish per decode step, so ``m``
    prefills delay each one: decode tokens come ``t_d + m t_p`` apart, the TPOT
    reported here (a request's own first gap is shorter, by ``(m + 1) t_p / 2`` on
    average when ``m`` is whole); each such cycle emits ``B + m`` tokens. A request
    that arrives as a decode step starts waits for it and for the prefills admitted
    before its own: ``TTFT <= t_d + ceil(m) t_p``, the TTFT reported.

    Args:
        batch: ``B`` (>= 1).
        output_len: ``T_o``, tokens per request (>= 2).
        prefill_s: ``t_p``, seconds of one request's prefill (> 0).
        decode_step_s: ``t_d``, seconds of one decode step at batch ``B`` (> 0).

    Returns:
        The steady state; its ``ttft`` is the bound above.

    Raises:
        TypeError, ValueError: a size is not an integer in range or a time not a
            positive number.
    """
    for name, value, least in (("batch", batch, 1), ("output_len", output_len, 2)):
        checks.integer(name, value, low=least)
    for name, value in (("prefill_s", prefill_s), ("decode_step_s", decode_step_s)):
        if checks.non_negative(name, value) == 0:
            raise ValueError(f"{name} must be > 0 s, got 0")
    m = batch / (output_len - 1)  # prefills per decode step
    tpot, ttft = decode_step_s + m * prefill_s, decode_step_s + math.ceil(m) * prefill_s
    return ServingPoint(batch, ttft, tpot, (batch + m) / tpot, m / tpot)
