"""What ``docs/inference/quantization.rst`` shows: its values and figures.

Every figure is computed at build time from small tensors drawn from fixed
generators (well under a second) or from the cost model of
:func:`aiinfra.infer.quant.triton_matmul.decode_step_time`.
"""

from __future__ import annotations

from functools import cache

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.infer.quant import kv as kv_quant
from aiinfra.infer.quant.outliers import (
    OUTLIER_THRESHOLD,
    llm_int8_matmul,
    vectorwise_int8_matmul,
)
from aiinfra.infer.quant.rtn import dequantize, quantize
from aiinfra.infer.quant.triton_matmul import decode_step_time
from aiinfra.models.presets import preset

LLAMA = "llama-3-8b"
OUTLIER = 20.0  # how much larger the outlier row / column / channel is
GROUP = 32  # group size of the granularity figure
GRANULARITIES = (("tensor", None), ("channel", None), ("group", GROUP))
CONTEXT = 1024  # tokens per sequence in the decoding cost model
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KV_CONTEXT = 8192  # sequence length of the KV budget


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# Section 1: round-to-nearest by granularity


def absmax_example() -> list[float]:
    """The vector that the absmax example quantizes."""
    return [0.3, -0.9, 0.1, 2.0]


def absmax_codes(bits: int = 8) -> list[int]:
    """Its absmax codes, ``round(q_max x / max |x|)``."""
    return quantize(torch.tensor(absmax_example()), bits).q.tolist()


@cache
def _granularity_errors() -> dict[tuple[str, int, str], float]:
    """Mean ``|W - W_hat|`` of a 64 x 256 N(0, 1) weight with one outlier row or column.

    Returns:
        ``{(where, bits, granularity): error}``, ``where`` ``"row"`` or ``"column"``.
    """
    w = torch.randn(64, 256, generator=_gen(0))  # (out, in)
    errors = {}
    for where in ("row", "column"):
        w_out = w.clone()
        if where == "row":
            w_out[3] *= OUTLIER  # one output channel
        else:
            w_out[:, 5] *= OUTLIER  # one input feature
        for bits in (8, 4):
            for gran, g in GRANULARITIES:
                qt = quantize(w_out, bits, "absmax", gran, g)
                err = (w_out - dequantize(qt)).abs().mean().item()
                errors[where, bits, gran] = err
    return errors


def granularity_error(where: str, bits: int, granularity: str) -> float:
    """One entry of :func:`_granularity_errors`."""
    return _granularity_errors()[where, bits, granularity]


def int4_column_tensor_over_group() -> float:
    """int4, outlier column: per-tensor error over group-wise error."""
    return granularity_error("column", 4, "tensor") / granularity_error(
        "column", 4, "group"
    )


def granularity_figure() -> Figure:
    """Bars: mean rounding error by granularity and bits, outlier row vs column."""
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, where in zip(axes, ("row", "column"), strict=True):
        for i, bits in enumerate((8, 4)):
            errs = [granularity_error(where, bits, g) for g, _ in GRANULARITIES]
            xs = [j + 0.38 * i for j in range(len(GRANULARITIES))]
            ax.bar(xs, errs, width=0.36, label=f"int{bits}")
        labels = ["tensor", "channel", f"group {GROUP}"]
        ax.set_xticks([j + 0.19 for j in range(3)], labels)
        ax.set_yscale("log")
        ax.set_title(f"one outlier {where} (x{OUTLIER:.0f})", fontsize=9)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel("mean |W - W_hat|")
    axes[0].legend(fontsize=8)
    return fig


# Section 2: outlier features and LLM.int8

OUTLIER_SCALES = (1, 2, 4, 6, 8, 12, 16, 20, 30, 40)


@cache
def _outlier_sweep() -> dict[str, list[float]]:
    """Relative error of ``x w^T`` as two input columns of ``x`` grow.

    ``x`` is 16 x 256 N(0, 1) with columns 7 and 200 multiplied by each of
    :data:`OUTLIER_SCALES`; ``w`` is 64 x 256 N(0, 1). Error: mean
    ``|Y - Y_ref|`` over mean ``|Y_ref|``.
    """
    g = _gen(1)
    x0 = torch.randn(16, 256, generator=g, dtype=torch.float64)
    w = torch.randn(64, 256, generator=g, dtype=torch.float64)
    out: dict[str, list[float]] = {"int8": [], "llm.int8": []}
    for f in OUTLIER_SCALES:
        x = x0.clone()
        x[:, [7, 200]] *= f
        ref = x @ w.T
        for name, fn in (
            ("int8", vectorwise_int8_matmul),
            ("llm.int8", llm_int8_matmul),
        ):
            err = (fn(x, w) - ref).abs().mean() / ref.abs().mean()
            out[name].append(err.item())
    return out


def llm_int8_gain_at_20() -> float:
    """Vector-wise int8 error over LLM.int8's, outlier columns 20x larger."""
    sweep = _outlier_sweep()
    i = OUTLIER_SCALES.index(20)
    return sweep["int8"][i] / sweep["llm.int8"][i]


def outlier_figure() -> Figure:
    """Lines: relative matmul error against the outlier columns' magnitude."""
    fig = Figure(figsize=(6, 3.2), layout="constrained")
    ax = fig.add_subplot()
    sweep = _outlier_sweep()
    ax.plot(OUTLIER_SCALES, sweep["int8"], "-o", label="vector-wise int8")
    ax.plot(OUTLIER_SCALES, sweep["llm.int8"], "-s", label="LLM.int8 (outliers in fp)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("magnitude of the two outlier columns (x N(0, 1))")
    ax.set_ylabel("mean |Y - Y_ref| / mean |Y_ref|")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


# Section 3: weight-only kernels and decoding speed (a cost model)

WEIGHT_LINES = (("bf16", "-o"), ("int8", "-^"), ("int4", "-s"), ("fp8", "--d"))


def _decode_tokens_per_second(
    weights: str, batch: int, context: int = CONTEXT, gpu: str = "H100"
) -> float:
    """Modelled tokens/s of Llama 3 8B decoding ``batch`` sequences."""
    step = decode_step_time(preset(LLAMA), GPUS[gpu], batch, context, weights)
    return batch / step


def int4_speedup(batch: int, context: int = CONTEXT) -> float:
    """Modelled int4 weight-only over bf16 tokens/s."""
    return _decode_tokens_per_second("int4", batch, context) / (
        _decode_tokens_per_second("bf16", batch, context)
    )


def bf16_ms_per_step() -> float:
    """Modelled ms of one bf16 decoding step of one sequence."""
    return 1e3 / _decode_tokens_per_second("bf16", 1)


PREFILL_TOKENS = 4096


def fp8_over_int4_prefill() -> float:
    """Modelled speed of fp8 W8A8 over int4 weight-only, 4096 tokens in one step."""
    return _decode_tokens_per_second("fp8", PREFILL_TOKENS, 1) / (
        _decode_tokens_per_second("int4", PREFILL_TOKENS, 1)
    )


def decode_speed_figure() -> Figure:
    """Modelled tokens/s against batch per weight format; int4's speed-up.

    Right: only batches whose bf16 cache fits next to bf16 weights on one H100.
    """
    fig = Figure(figsize=(6.8, 3.3), layout="constrained")
    left, right = fig.subplots(1, 2)
    for weights, style in WEIGHT_LINES:
        tps = [_decode_tokens_per_second(weights, b) for b in BATCHES]
        label = f"{weights} W8A8" if weights == "fp8" else f"{weights} weights"
        left.plot(BATCHES, tps, style, label=label, markersize=4)
    left.set_yscale("log")
    left.set_ylabel(f"tokens / s, T = {CONTEXT} (model)")
    for context, style in ((128, "-o"), (CONTEXT, "-s"), (8192, "-^")):
        fits = [b for b in BATCHES if b * context <= _kv_tokens("bf16")]  # in HBM
        gains = [int4_speedup(b, context) for b in fits]
        right.plot(fits, gains, style, label=f"T = {context}", markersize=4)
    right.set_ylabel("int4 over bf16 tokens / s (model)")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(BATCHES[::2], [str(b) for b in BATCHES[::2]])
        ax.set_xlabel("sequences decoded together, B")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return fig


# Section 4: KV-cache quantization

KV_SETUPS = ((LLAMA, "H100", 1), ("llama-3-70b", "H100", 2))
KEY_LABELS = {"plain": "plain keys", "outliers": "keys with outlier channels"}


@cache
def _kv_errors() -> dict[tuple[str, str], float]:
    """Attention error of each cache format, plain keys and keys with outliers.

    One decoding query per head of Llama 3 8B's shape (``H = 32``, ``G = 8``,
    ``d = 128``) over 256 cached N(0, 1) tokens; "outliers": 4 key channels 10x.
    """
    g = _gen(2)
    q = torch.randn(1, 32, 1, 128, generator=g)  # (B, H, 1, d)
    k, v = (torch.randn(1, 8, 256, 128, generator=g) for _ in range(2))  # (B,G,T,d)
    k_out = k.clone()
    k_out[..., :4] *= 10  # a few large key channels
    return {
        (keys, fmt): kv_quant.kv_attention_error(q, kk, v, fmt)
        for keys, kk in (("plain", k), ("outliers", k_out))
        for fmt in kv_quant.KV_FORMATS
    }


def _kv_error(keys: str, fmt: str) -> float:
    """One entry of :func:`_kv_errors`."""
    return _kv_errors()[keys, fmt]


def _kv_tokens(fmt: str, name: str = LLAMA, gpu: str = "H100", n: int = 1) -> int:
    """Tokens of ``fmt`` cache that fit next to bf16 weights."""
    return kv_quant.kv_tokens(preset(name), GPUS[gpu], fmt, n)


def kv_sequences(fmt: str, name: str = LLAMA, gpu: str = "H100", n: int = 1) -> int:
    """Sequences of 8192 tokens that fit."""
    return _kv_tokens(fmt, name, gpu, n) // KV_CONTEXT


def kv_int8_gain() -> float:
    """Tokens of int8 cache over bf16 (below 2: the scales)."""
    return _kv_tokens("int8") / _kv_tokens("bf16")


def kv_error_ratio(keys: str, fmt: str) -> float:
    """Attention error of ``fmt`` over bf16's."""
    return _kv_error(keys, fmt) / _kv_error(keys, "bf16")


def kv_kib_per_token(fmt: str) -> float:
    """Llama 3 8B's cache bytes per token in ``fmt``, KiB."""
    return kv_quant.quantized_bytes_per_token(preset(LLAMA), fmt) / 1024


def kv_figure() -> Figure:
    """Two panels: sequences that fit per format; attention error per format."""
    fig = Figure(figsize=(6.6, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    fmts = kv_quant.KV_FORMATS
    for i, (name, gpu, n) in enumerate(KV_SETUPS):
        seqs = [kv_sequences(f, name, gpu, n) for f in fmts]
        xs = [j + 0.38 * i for j in range(len(fmts))]
        left.bar(xs, seqs, width=0.36, label=f"{name}, {n} x {gpu}")
    left.set_xticks([j + 0.19 for j in range(len(fmts))], fmts)
    left.set_ylabel(f"sequences of {KV_CONTEXT} tokens")
    left.legend(fontsize=7, loc="upper right")
    left.set_ylim(0, 1.35 * kv_sequences("fp8"))
    for i, keys in enumerate(("plain", "outliers")):
        errs = [_kv_error(keys, f) for f in fmts]
        xs = [j + 0.38 * i for j in range(len(fmts))]
        right.bar(xs, errs, width=0.36, label=KEY_LABELS[keys])
    right.set_xticks([j + 0.19 for j in range(len(fmts))], fmts)
    right.set_yscale("log")
    right.set_ylabel("max |O - O_fp32|")
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.grid(True, axis="y", which="both", alpha=0.3)
    return fig


def outlier_threshold() -> float:
    """LLM.int8's threshold on an input column's magnitude (its alpha, 6.0)."""
    return OUTLIER_THRESHOLD
