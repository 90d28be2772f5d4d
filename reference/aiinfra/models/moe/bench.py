"""Timing the three ways to run the experts: token loop, masked expert loop, grouped.

The same :class:`~aiinfra.models.moe.layer.MoELayer` weights run as ``moe_loop`` (one
small product per token and chosen expert), as the layer itself (per expert, gather the
tokens that chose it through a mask, as transformers' Mixtral block does), and as
:class:`~aiinfra.models.moe.grouped.GroupedMoELayer` (sort once, one slice per
expert), with ``torch._grouped_mm`` as a fourth variant where the build has it. The
forward pass is timed (no autograd) over batch sizes ``T``, the implementations in
turn within each repeat so that a busy machine slows them alike, and the fastest
repeat is kept (the least disturbed);
``aiinfra bench moe --stamp`` stores the rows as ``docs/_data/bench/moe-cpu.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from aiinfra import progress, results
from aiinfra.models.moe.grouped import GroupedMoELayer
from aiinfra.models.moe.layer import MoELayer, moe_loop
from aiinfra.models.moe.spec import MoESpec
from aiinfra.report import Table
from aiinfra.timing import note_spread

IMPLS = ("token loop", "masked per expert", "grouped", "grouped_mm")


@dataclass(frozen=True)
class MoEBenchConfig:
    """The timed layer and batches (fp32 on the CPU).

    Raises:
        ValueError: a size < 1 or no batch size.
    """

    tokens: tuple[int, ...] = (256, 1024, 4096)  # T
    d_model: int = 256  # h
    n_experts: int = 64  # E; fine-grained experts as in DeepSeekMoE
    top_k: int = 6  # K
    d_expert: int = 64  # d_e
    repeats: int = 15
    threads: int = 1  # intra-op threads while timing (a shared machine: 1)
    loop_max_tokens: int = 1024  # the token loop is skipped above this T (too slow)

    def __post_init__(self) -> None:
        if not self.tokens or min(self.tokens) < 1:
            raise ValueError(f"tokens must be batch sizes >= 1, got {self.tokens!r}")
        for name in ("d_model", "n_experts", "top_k", "d_expert", "repeats", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")


def _time_s(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_bench(cfg: MoEBenchConfig, generator: torch.Generator | None = None) -> dict:
    """Time each implementation at each ``T``; returns ``{"config", "rows"}``.

    Args:
        cfg: what to time.
        generator: for the weights and tokens (default: seeded with 0).
    """
    g = generator or torch.Generator().manual_seed(0)
    spec = MoESpec(cfg.n_experts, cfg.top_k, cfg.d_expert)
    layer = MoELayer(cfg.d_model, spec)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5)
    grouped = GroupedMoELayer(cfg.d_model, spec)
    grouped.load_state_dict(layer.state_dict())
    grouped_mm = GroupedMoELayer(cfg.d_model, spec, grouped_mm=True)
    grouped_mm.load_state_dict(layer.state_dict())
    runs = {
        "token loop": lambda x: moe_loop(layer, x),
        "masked per expert": layer,
        "grouped": grouped,
    }
    if hasattr(torch, "_grouped_mm"):
        runs["grouped_mm"] = grouped_mm
    rows = []
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.no_grad():
            for T in progress.track(cfg.tokens, "batch sizes T"):
                x = torch.randn(T, cfg.d_model, generator=g)  # (T, h)
                timed = {
                    impl: fn
                    for impl, fn in runs.items()
                    if impl != "token loop" or T <= cfg.loop_max_tokens
                }
                times: dict[str, list[float]] = {impl: [] for impl in timed}
                for round_ in range(cfg.repeats + 1):
                    for impl, fn in timed.items():
                        seconds = _time_s(lambda fn=fn, x=x: fn(x))
                        if round_ > 0:  # round 0 warms up
                            times[impl].append(seconds)
                for impl, seconds in times.items():
                    note_spread(seconds)
                    rows.append({"tokens": T, "impl": impl, "ms": 1e3 * min(seconds)})
    finally:
        torch.set_num_threads(threads)
    config = asdict(cfg) | {"dtype": "float32"}
    return {"config": config, "rows": rows}


def moe_bench_table(res: dict) -> Table:
    """Forward time per implementation and ``T``, and the speed-up over the mask."""
    masked = {
        r["tokens"]: r["ms"] for r in res["rows"] if r["impl"] == "masked per expert"
    }
    rows = [
        [
            r["tokens"],
            r["impl"],
            round(r["ms"], 2),
            round(masked[r["tokens"]] / r["ms"], 2),
        ]
        for r in res["rows"]
    ]
    st, c = res["stamp"], res["config"]
    note = "Fastest forward pass of the repeats, fp32, no autograd."
    stamp = (
        f"h = {c['d_model']}, E = {c['n_experts']}, K = {c['top_k']}, "
        f"d_e = {c['d_expert']}; {c['repeats']} repeats, {c['threads']} threads on "
        f"{results.machine_label(st)}, load {st['load_1min']}; torch {st['torch']}; "
        f"{st['date']}"
    )
    return Table(
        ["T", "implementation", "forward (ms)", "speed-up over masked"],
        rows,
        note,
        stamp,
    )
