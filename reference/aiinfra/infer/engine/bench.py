"""Timing the engine on the CPU (``aiinfra bench engine``).

Three runs of the real :class:`~aiinfra.infer.engine.core.Engine` on one random model:

- *batch sweep*: the same requests, all queued at once, served with continuous
  batching at several ``max_num_seqs``; throughput and the mean step time at each;
- *static against continuous*: the same requests in fixed groups that run until
  their longest member ends (static batching) and with the engine admitting a
  request as soon as a slot frees (continuous), at one batch size;
- *prefix caching*: requests that share a long system prompt, sent one after the
  other, with the prefix cache on and off: prompt tokens computed and TTFT.

Greedy decoding makes every run produce the same tokens for a request, which the
result records. ``aiinfra bench engine --stamp`` stores ``engine-cpu.json``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from aiinfra import checks, progress, results
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.report import Table

_SIZES = (
    *("d_model", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "requests"),
    *("prompt_min", "prompt_max", "output_min", "output_max", "static_batch"),
    *("system_len", "suffix_len", "prefix_requests", "prefix_output"),
    *("block_size", "token_budget", "threads"),
)


@dataclass(frozen=True)
class EngineBenchConfig:
    """The served model and the three runs (fp32 on the CPU).

    Raises:
        ValueError: a size < 1, a minimum above its maximum, or batch sizes that
            are not ints >= 1 in increasing order.
    """

    d_model: int = 256  # h
    n_layers: int = 4  # L
    n_heads: int = 8  # H
    n_kv_heads: int = 2  # G
    vocab_size: int = 256  # V: bytes
    requests: int = 48
    prompt_min: int = 16  # prompt lengths, uniform
    prompt_max: int = 128
    output_min: int = 8  # output lengths, uniform
    output_max: int = 128
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)  # max_num_seqs of the sweep
    static_batch: int = 16
    system_len: int = 192  # the shared prefix of the prefix-caching run
    suffix_len: int = 16
    prefix_requests: int = 8
    prefix_output: int = 8
    block_size: int = 16  # B
    token_budget: int = 256  # max_num_batched_tokens
    threads: int = 1  # intra-op threads while timing (a shared machine: 1)
    seed: int = 0

    def __post_init__(self) -> None:
        for name in _SIZES:
            checks.positive_int(name, getattr(self, name))
        for low, high in (("prompt_min", "prompt_max"), ("output_min", "output_max")):
            if getattr(self, low) > getattr(self, high):
                raise ValueError(
                    f"{low} ({getattr(self, low)}) must be <= {high} "
                    f"({getattr(self, high)})"
                )
        b = self.batch_sizes
        if (
            not b
            or not all(isinstance(s, int) and s >= 1 for s in b)
            or list(b) != sorted(set(b))
        ):
            raise ValueError(
                f"batch_sizes must be increasing ints >= 1, got {self.batch_sizes!r}"
            )

    def model_config(self) -> TransformerConfig:
        """The served Transformer (SwiGLU width about ``8h/3``, as Llama)."""
        return TransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            d_ff=(8 * self.d_model // 3 + 63) // 64 * 64,
            max_seq_len=max(
                self.prompt_max + self.output_max,
                self.system_len + self.suffix_len + self.prefix_output,
            ),
        )


def _model(cfg: EngineBenchConfig, g: torch.Generator) -> Transformer:
    model = Transformer(cfg.model_config()).eval()
    with torch.no_grad():
        for p in model.parameters():  # random but not tiny: varied argmax tokens
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 / p.shape[-1] ** 0.5)
    return model


def _engine(model: Transformer, cfg: EngineBenchConfig, seqs: int, **kw: Any) -> Engine:
    per_request = -(-model.config.max_seq_len // cfg.block_size)
    return Engine(
        model,
        num_blocks=per_request * max(seqs, cfg.prefix_requests),  # no preemption
        block_size=cfg.block_size,
        max_num_seqs=seqs,
        max_num_batched_tokens=cfg.token_budget,
        **kw,
    )


def _serve(engine: Engine, trace: list[tuple[list[int], int]]) -> dict[str, Any]:
    """Queue every request at once and run to the end; times, steps, outputs."""
    start = time.perf_counter()
    seqs = [engine.add_request(p, SamplingParams(max_tokens=n)) for p, n in trace]
    steps = engine.num_steps
    while engine.has_unfinished():
        engine.step()
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "steps": engine.num_steps - steps,
        "latency_s": [s.finish_time - s.arrival_time for s in seqs],
        "outputs": [s.output for s in seqs],
    }


def run_bench(cfg: EngineBenchConfig) -> dict[str, Any]:
    """Run the sweep, static against continuous, and prefix caching.

    Returns:
        ``sweep``: per batch size, seconds, steps, generated tokens and mean
        latency; ``static`` and ``continuous``: the same at ``static_batch``;
        ``prefix``: with the cache ``"on"`` and ``"off"``, prompt tokens computed
        and each request's TTFT; ``same_tokens``: every run gave every request the
        same tokens.
    """
    g = torch.Generator().manual_seed(cfg.seed)
    model = _model(cfg, g)

    def lengths(low: int, high: int) -> list[int]:
        return torch.randint(low, high + 1, (cfg.requests,), generator=g).tolist()

    prompts = [
        torch.randint(cfg.vocab_size, (n,), generator=g).tolist()
        for n in lengths(cfg.prompt_min, cfg.prompt_max)
    ]
    trace = list(zip(prompts, lengths(cfg.output_min, cfg.output_max), strict=True))
    generated = sum(n for _, n in trace)
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        _serve(_engine(model, cfg, 4), trace[:4])  # warm-up
        sweep = {}
        for s in progress.track(cfg.batch_sizes, "max_num_seqs"):
            sweep[s] = _serve(
                _engine(model, cfg, s, enable_prefix_caching=False), trace
            )
        static = _static(model, cfg, trace)
        continuous = sweep.get(cfg.static_batch) or _serve(
            _engine(model, cfg, cfg.static_batch, enable_prefix_caching=False), trace
        )
        prefix = _prefix(model, cfg, g)
    finally:
        torch.set_num_threads(threads)
    reference = sweep[cfg.batch_sizes[0]]["outputs"]
    same = all(r["outputs"] == reference for r in (*sweep.values(), static)) and (
        prefix["on"]["outputs"] == prefix["off"]["outputs"]
    )

    def summary(run: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in run.items() if k != "outputs"} | {
            "tokens_per_s": generated / run["seconds"],
            "mean_latency_s": sum(run["latency_s"]) / len(run["latency_s"]),
        }

    return {
        "config": asdict(cfg) | {"dtype": "float32"},
        "generated_tokens": generated,
        "prompt_tokens": sum(len(p) for p in prompts),
        "same_tokens": same,
        "sweep": {str(s): summary(r) for s, r in sweep.items()},
        "static": summary(static),
        "continuous": summary(continuous),
        "prefix": {
            k: {kk: vv for kk, vv in v.items() if kk != "outputs"}
            for k, v in prefix.items()
        },
    }


def _static(
    model: Transformer, cfg: EngineBenchConfig, trace: list[tuple[list[int], int]]
) -> dict[str, Any]:
    """Groups of ``static_batch`` in arrival order, each run to its longest end."""
    engine = _engine(model, cfg, cfg.static_batch, enable_prefix_caching=False)
    start, latency, outputs, steps = time.perf_counter(), [], [], 0
    for i in range(0, len(trace), cfg.static_batch):
        run = _serve(engine, trace[i : i + cfg.static_batch])
        done = time.perf_counter() - start  # every member waited for the longest
        latency += [done] * len(run["outputs"])
        outputs += run["outputs"]
        steps += run["steps"]
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "steps": steps,
        "latency_s": latency,
        "outputs": outputs,
    }


def _prefix(
    model: Transformer, cfg: EngineBenchConfig, g: torch.Generator
) -> dict[str, dict[str, Any]]:
    """Requests sharing a system prompt, one after the other, cache on and off."""
    system = torch.randint(cfg.vocab_size, (cfg.system_len,), generator=g).tolist()
    prompts = [
        system + torch.randint(cfg.vocab_size, (cfg.suffix_len,), generator=g).tolist()
        for _ in range(cfg.prefix_requests)
    ]
    out = {}
    for name, on in (("on", True), ("off", False)):
        engine = _engine(model, cfg, 1, enable_prefix_caching=on)
        ttft, outputs = [], []
        for p in prompts:
            seq = engine.add_request(p, SamplingParams(max_tokens=cfg.prefix_output))
            while engine.has_unfinished():
                engine.step()
            ttft.append(seq.ttft)
            outputs.append(seq.output)
        cached = engine.scheduler.num_cached_tokens
        out[name] = {
            "prompt_tokens": sum(len(p) for p in prompts),
            "computed_prompt_tokens": sum(len(p) for p in prompts) - cached,
            "ttft_s": ttft,
            "outputs": outputs,
        }
    return out


def step_time_fit(res: dict[str, Any]) -> tuple[float, float]:
    """Least-squares ``t_step = a + b n`` over the sweep; ``(a, b)`` in seconds.

    ``n`` is the tokens generated per step (generated tokens over steps), close to
    the sequences decoding in a step.
    """
    xs, ys = [], []
    for run in res["sweep"].values():
        xs.append(res["generated_tokens"] / run["steps"])
        ys.append(run["seconds"] / run["steps"])
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    var = sum((x - mx) ** 2 for x in xs)
    b = (
        sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var
        if var
        else 0.0
    )
    return my - b * mx, b


def _stamp(res: dict[str, Any]) -> str:
    st, c = res["stamp"], res["config"]
    return (
        f"h = {c['d_model']}, L = {c['n_layers']}, H = {c['n_heads']}, "
        f"G = {c['n_kv_heads']}, fp32, blocks of {c['block_size']}, token budget "
        f"{c['token_budget']}; {c['threads']} thread(s) on "
        f"{results.machine_label(st)}; torch {st['torch']}; {st['date']}"
    )


def sweep_table(res: dict[str, Any]) -> Table:
    """The batch sweep: the same requests served at each ``max_num_seqs``."""
    rows = [
        [
            int(s),
            run["steps"],
            round(run["seconds"], 2),
            round(run["tokens_per_s"]),
            round(run["mean_latency_s"], 2),
        ]
        for s, run in sorted(res["sweep"].items(), key=lambda kv: int(kv[0]))
    ]
    note = (
        "The same requests, all queued at once, greedy, served with continuous "
        "batching of at most max_num_seqs sequences per step."
    )
    return Table(
        ["max_num_seqs", "steps", "seconds", "tokens/s", "mean latency (s)"],
        rows,
        note,
        _stamp(res),
    )


def engine_table(res: dict[str, Any]) -> Table:
    """Static against continuous batching on the same requests, measured."""
    c, rows = res["config"], []
    for label, key in (("static", "static"), ("continuous", "continuous")):
        run = res[key]
        rows.append(
            [
                label,
                run["steps"],
                round(run["seconds"], 2),
                round(run["tokens_per_s"]),
                round(run["mean_latency_s"], 2),
            ]
        )
    note = (
        "The same requests, all queued at once, greedy; static batching runs fixed "
        "groups to their longest member, continuous batching refills a slot as soon "
        "as a request ends. Measured with the engine on the CPU."
    )
    stamp = (
        f"{c['requests']} requests, prompts {c['prompt_min']}-{c['prompt_max']}, "
        f"outputs {c['output_min']}-{c['output_max']} tokens, batches of "
        f"{c['static_batch']}; " + _stamp(res)
    )
    return Table(
        ["batching", "steps", "seconds", "tokens/s", "mean latency (s)"],
        rows,
        note,
        stamp,
    )


def prefix_table(res: dict[str, Any]) -> Table:
    """Prompt tokens computed and TTFT with the prefix cache on and off."""
    c, rows = res["config"], []
    for label in ("off", "on"):
        run = res["prefix"][label]
        ttft = run["ttft_s"]
        rows.append(
            [
                label,
                run["computed_prompt_tokens"],
                run["prompt_tokens"],
                round(1000 * sum(ttft[1:]) / max(len(ttft) - 1, 1), 1),
            ]
        )
    note = (
        "Requests sharing a system prompt, sent one after the other; the TTFT is the "
        "mean over the requests after the first. Measured with the engine on the CPU."
    )
    stamp = (
        f"{c['prefix_requests']} requests, a {c['system_len']}-token system prompt "
        f"and {c['suffix_len']} tokens of their own; " + _stamp(res)
    )
    return Table(
        ["prefix cache", "prompt tokens run", "prompt tokens", "mean TTFT (ms)"],
        rows,
        note,
        stamp,
    )
