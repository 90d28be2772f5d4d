"""What ``docs/inference/kv_cache.rst`` shows: its values, tables, figures.

The cost model runs on Llama 3 8B (:mod:`aiinfra.models.presets`) and the datasheet
numbers of :mod:`aiinfra.hardware`; the timings come from the stamped file of
``aiinfra bench decode`` (:mod:`aiinfra.infer.kv.decode_bench`).
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer.kv import decode, decode_bench
from aiinfra.infer.step_cost import decode_step_bytes
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.flops import matmul_parameters
from aiinfra.models.kv_budget import kv_budget
from aiinfra.models.presets import preset
from aiinfra.report import Table

_LLAMA = "llama-3-8b"
_PROMPT = 1024  # T_0 of the FLOP comparison
_GENERATED = 512  # the speed-up the page quotes: after 512 generated tokens
_BATCHES = (1, 8, 32, 128)


def _llama():  # noqa: ANN202 - a TransformerConfig
    return preset(_LLAMA)


def llama_psi_billions() -> float:
    """Llama 3 8B's matmul weights, billions (the ``Psi`` of ``2 Psi`` per token)."""
    return matmul_parameters(_llama()) / 1e9


def recompute_over_cached_flops() -> float:
    """The step after the prompt and 512 tokens: FLOPs recomputed over cached."""
    c, n = _llama(), _PROMPT + _GENERATED
    return decode.step_flops(c, n, cached=False) / decode.step_flops(c, n, cached=True)


def step_flops_figure() -> Figure:
    """FLOPs of each decode step with and without the cache, Llama 3 8B."""
    c = _llama()
    steps = list(range(0, 2049, 32))
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for cached, label, style in (
        (False, "recompute the prefix", "--"),
        (True, "KV cache", "-"),
    ):
        flops = [decode.step_flops(c, _PROMPT + t, cached) / 1e12 for t in steps]
        ax.plot(steps, flops, style, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("tokens generated after a 1024-token prompt")
    ax.set_ylabel("forward TFLOPs of the step")
    ax.set_title("Llama 3 8B, one sequence")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def _bench() -> dict:
    return results.load("decode", "cpu")


def decode_table() -> Table:
    """Measured tokens/s of both loops after ``n`` tokens, and the speed-up."""
    return decode_bench.decode_bench_table(_bench())


def measured_speedup_512() -> float:
    """How many times faster the cache made the first 512 tokens on this CPU."""
    return decode_bench.speedup(_bench(), _GENERATED)


def measured_cached_ms_first() -> float:
    """Mean ms per token of the cached loop over the first 32 tokens."""
    return 1e3 * sum(_bench()["cached_s"][1:33]) / 32


def measured_cached_ms_last() -> float:
    """Mean ms per token of the cached loop over the last 32 of 512 tokens."""
    return 1e3 * sum(_bench()["cached_s"][_GENERATED - 32 : _GENERATED]) / 32


def measured_recompute_ms_last() -> float:
    """Mean ms per token of recomputation over the last 32 of 512 tokens."""
    return 1e3 * sum(_bench()["recompute_s"][_GENERATED - 32 : _GENERATED]) / 32


def decode_timing_figure() -> Figure:
    """Measured time per token and cumulative speed-up, both loops."""
    res = _bench()
    cached, recompute = res["cached_s"], res["recompute_s"]
    n = list(range(1, len(cached) + 1))
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    left.plot(n, [1e3 * s for s in recompute], ".", markersize=2, label="recompute")
    left.plot(n, [1e3 * s for s in cached], ".", markersize=2, label="KV cache")
    left.set_yscale("log")
    left.set_xlabel("generated token")
    left.set_ylabel("ms per token")
    left.legend(fontsize=8, markerscale=4)
    total_c = total_r = 0.0
    ratio = []
    for c_s, r_s in zip(cached, recompute, strict=True):
        total_c, total_r = total_c + c_s, total_r + r_s
        ratio.append(total_r / total_c)
    right.plot(n, ratio)
    right.axhline(10, color="gray", linestyle=":", linewidth=0.8)
    right.set_xlabel("tokens generated")
    right.set_ylabel("speed-up of the cache")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
    return fig


def llama_cache_kib_per_token() -> float:
    """Llama 3 8B's bf16 KV cache per token, KiB."""
    return kv_bytes_per_token(_llama(), 2) / 1024


def h100_bandwidth_tbs() -> float:
    """The H100 SXM's HBM bandwidth, TB/s (its datasheet)."""
    return GPUS["H100"].hbm_bandwidth / 1e12


def h100_bound_batch1() -> float:
    """Tokens/s ceiling of one Llama 3 8B sequence on an H100, short context."""
    return decode.decode_bound_tokens_per_s(_llama(), GPUS["H100"].hbm_bandwidth, 1, 0)


def h100_bound_batch32_8k() -> float:
    """Per-sequence ceiling at batch 32 and 8K context on an H100, tokens/s."""
    bw = GPUS["H100"].hbm_bandwidth
    return decode.decode_bound_tokens_per_s(_llama(), bw, 32, 8192)


def h100_total_batch32_8k() -> float:
    """The whole batch's ceiling at batch 32 and 8K context on an H100, tokens/s."""
    return 32 * h100_bound_batch32_8k()


def cache_share_batch32_8k() -> float:
    """Share of a step's bytes that is KV cache, batch 32 at 8K context."""
    c = _llama()
    cache = 32 * (8192 + 1) * kv_bytes_per_token(c, 2)  # read, and the new K, V
    return cache / decode_step_bytes(c, 32, 8192)


def bound_figure() -> Figure:
    """Memory-bound decode ceiling of Llama 3 8B on an H100 over context and batch."""
    c, bw = _llama(), GPUS["H100"].hbm_bandwidth
    contexts = [2**k for k in range(8, 18)]
    fig = Figure(figsize=(7, 3.2), layout="constrained")
    per_seq, total = fig.subplots(1, 2, sharex=True)
    room = kv_budget(c, GPUS["H100"]).tokens  # what fits next to the weights
    for B in _BATCHES:
        fit = [t for t in contexts if B * t <= room]
        rate = [decode.decode_bound_tokens_per_s(c, bw, B, t) for t in fit]
        per_seq.plot(fit, rate, "-o", markersize=3, label=f"B = {B}")
        total.plot(fit, [B * r for r in rate], "-o", markersize=3, label=f"B = {B}")
    per_seq.set_ylabel("tokens/s per sequence")
    total.set_ylabel("tokens/s of the batch")
    for ax in (per_seq, total):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context (tokens)")
        ax.grid(True, which="both", alpha=0.3)
    total.legend(fontsize=8)
    return fig
