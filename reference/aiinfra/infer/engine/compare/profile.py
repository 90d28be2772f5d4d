"""Where the engine's decode step goes, part by part (:func:`profile_engine`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from aiinfra.infer.engine.compare.config import CompareConfig
from aiinfra.infer.engine.compare.offline import Timer
from aiinfra.infer.engine.core import Engine, SamplingParams
from aiinfra.models.transformer import Transformer


def profile_engine(
    model: Transformer, cfg: CompareConfig, prompts: Sequence[list[int]], slots: int
) -> dict[str, float]:
    """Where a decode step of ``slots`` sequences spends its time, ms per step.

    The engine is brought to ``slots`` decoding sequences; then ``profile_steps``
    steps are timed with a clock around the scheduler, the packing of the step's
    index tensors (``StepLayout``), the model's forward pass and the batched
    sampling, and as many again under the torch profiler, whose operators' own CPU
    time splits the forward pass (less the packing) into matmuls, the paged gather
    and write (``index_select``, ``index_copy_``), the attention kernel (SDPA), the
    other operators (norms, RoPE, SiLU, residuals) and the Python and dispatch
    between them, in proportion.
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    from aiinfra.infer.engine import model_runner

    n = cfg.profile_steps
    engine = Engine(
        model,
        num_blocks=-(-cfg.max_seq_len // cfg.block_size) * slots,
        block_size=cfg.block_size,
        max_num_seqs=slots,
        max_num_batched_tokens=max(cfg.token_budget, sum(map(len, prompts[:slots]))),
        enable_prefix_caching=False,
    )
    for p in prompts[:slots]:
        engine.add_request(p, SamplingParams(max_tokens=2 * n + 4))
    for _ in range(3):  # the prefill, then decodes
        engine.step()
    spent: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            with record_function(name):
                out = fn(*args, **kw)
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - start
            return out

        return wrapped

    layout = model_runner.StepLayout
    engine.scheduler.schedule = timed("schedule", engine.scheduler.schedule)
    engine.runner.forward = timed("forward", engine.runner.forward)
    engine._sample = timed("sample", engine._sample)
    model_runner.StepLayout = timed("pack", layout)  # type: ignore[misc]
    try:
        with Timer() as plain:
            for _ in range(n):
                engine.step()
        ms = {k: 1e3 * v / n for k, v in spent.items()}
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(n):
                engine.step()
    finally:
        model_runner.StepLayout = layout  # type: ignore[misc]
    groups = {
        "matmuls": ("aten::mm", "aten::addmm", "aten::bmm"),
        "paged gather and write": ("aten::index_select", "aten::index_copy_"),
        "attention kernel (SDPA)": (
            "aten::_scaled_dot_product_flash_attention_for_cpu",
        ),
    }
    own = dict.fromkeys([*groups, "other operators"], 0.0)
    region: dict[str, float] = {}
    for ev in prof.key_averages():
        if ev.key in spent:
            region[ev.key] = ev.cpu_time_total
        elif ev.key.startswith("aten::"):
            group = next((g for g, k in groups.items() if ev.key in k), None)
            own[group or "other operators"] += ev.self_cpu_time_total
    step = 1e3 * plain.wall / n
    model = ms["forward"] - ms["pack"]  # the forward pass less the packing
    profiled = max(region["forward"] - region.get("pack", 0.0), 1e-9)
    out = {"schedule": ms["schedule"], "pack": ms["pack"]}
    for g, t in own.items():
        out[g] = model * min(t / profiled, 1.0)
    out["Python and dispatch"] = max(0.0, model - sum(out[g] for g in own))
    out["sample"] = ms["sample"]
    out["engine bookkeeping"] = max(
        0.0, step - ms["schedule"] - ms["forward"] - ms["sample"]
    )
    out["step"] = step
    return out
