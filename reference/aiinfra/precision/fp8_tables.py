"""FP8 in numbers: error by scaling granularity and by format, computed at build.

An activation with a few large channels (the outliers of LLM activations, Dettmers
et al. 2022) and one massive value on the first token (Sun et al. 2024) is cast to
E4M3 with each granularity of :data:`aiinfra.precision.fp8.GRANULARITIES`; the
error is measured on the whole tensor and on the ordinary values alone, the ones an
outlier's scale pushes towards the subnormals. A matmul with inputs rounded to each
format puts the error beside the H100's dense peak of the format
(:data:`aiinfra.accelerators.GPUS`). A tensor that jumps in size shows what delayed
scaling does that current scaling does not.
"""

from __future__ import annotations

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.precision.formats import DTYPES, float_format, to_tf32
from aiinfra.precision.fp8 import (
    E4M3_MAX,
    GRANULARITIES,
    DelayedScaler,
    block_amax,
    dequantize_fp8,
    quantize_fp8,
    relative_error,
)
from aiinfra.report import Table

TOKENS, CHANNELS = 256, 512
OUTLIER_CHANNELS = (10, 300)  # in 128-channel tiles 0 and 2
MASSIVE_AT = (0, 200)  # (token, channel): one massive activation, in tile 1
MAGNITUDES = (1.0, 1e2, 1e3, 1e4, 1e5)  # outlier size over the ordinary values'


def activations_with_outliers(
    magnitude: float, tokens: int = TOKENS, channels: int = CHANNELS, seed: int = 0
) -> torch.Tensor:
    """Standard-normal activations with outliers, scaled up by ``magnitude``.

    The outliers are the channels :data:`OUTLIER_CHANNELS` and the one element
    :data:`MASSIVE_AT`.

    Args:
        magnitude: factor applied to the outlier channels (1: no outliers).
        tokens: T, at least 1.
        channels: C, more than max(OUTLIER_CHANNELS).
        seed: of the ``torch.Generator``.

    Returns:
        (T, C) fp32 tensor.

    Raises:
        ValueError: a non-positive magnitude or too few channels.
    """
    if magnitude <= 0 or channels <= max(OUTLIER_CHANNELS) or tokens < 1:
        raise ValueError(
            f"need magnitude > 0, tokens >= 1 and channels > {max(OUTLIER_CHANNELS)}"
        )
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, channels, generator=g)  # (T, C)
    x[outlier_mask(tokens, channels)] *= magnitude
    return x


def outlier_mask(tokens: int = TOKENS, channels: int = CHANNELS) -> torch.Tensor:
    """(T, C) boolean mask of the outliers of :func:`activations_with_outliers`."""
    mask = torch.zeros(tokens, channels, dtype=torch.bool)  # (T, C)
    mask[:, list(OUTLIER_CHANNELS)] = True
    mask[MASSIVE_AT] = True
    return mask


def granularity_stats(
    magnitude: float, tokens: int = TOKENS
) -> dict[str, tuple[float, float, float]]:
    """Errors and underflow of an E4M3 round trip, per granularity.

    Args:
        magnitude: the outliers' size over the ordinary values.
        tokens: T, a multiple of 128.

    Returns:
        Per granularity: whole-tensor error, ordinary-value error, and the share
        of ordinary values cast below E4M3's smallest normal (or to zero).
    """
    x = activations_with_outliers(magnitude, tokens)  # (T, C)
    ordinary = ~outlier_mask(tokens)
    min_normal = float_format("fp8 e4m3").min_normal
    out = {}
    for name, block in GRANULARITIES.items():
        q, sigma = quantize_fp8(x, block)  # (T, C), (T/br, C/bc)
        x_hat = dequantize_fp8(q, sigma)  # (T, C)
        small = (q.float().abs() < min_normal)[ordinary].float().mean().item()
        whole = relative_error(x, x_hat)
        out[name] = (whole, relative_error(x[ordinary], x_hat[ordinary]), small)
    return out


def shared_with_outlier(block: tuple[int, int] | None, tokens: int = TOKENS) -> float:
    """Share of the ordinary values whose group also holds an outlier."""
    mask = outlier_mask(tokens)
    polluted = block_amax(mask.float(), block) > 0  # (T/br, C/bc)
    br, bc = mask.shape[0] // polluted.shape[0], mask.shape[1] // polluted.shape[1]
    polluted = polluted.repeat_interleave(br, 0).repeat_interleave(bc, 1)  # (T, C)
    return (polluted & ~mask).sum().item() / (~mask).sum().item()


def granularity_table(magnitude: float = 1e4, tokens: int = TOKENS) -> Table:
    """E4M3 error of an activation with outliers, per granularity.

    Args:
        magnitude: the outliers' size over the ordinary values.
        tokens: T, a multiple of 128.

    Returns:
        One row per :data:`aiinfra.precision.fp8.GRANULARITIES` entry.
    """
    rows = []
    mask = outlier_mask(tokens)
    for name, stats in granularity_stats(magnitude, tokens).items():
        whole, ordinary, small = stats
        block = GRANULARITIES[name]
        size = mask.numel() // block_amax(mask.float(), block).numel()
        rows.append([name, size, f"{shared_with_outlier(block, tokens):.1%}"])
        rows[-1] += [f"{small:.1%}", f"{whole:.2%}", f"{ordinary:.2%}"]
    return Table(
        columns=[
            "scale per",
            "elements per scale",
            "share with an outlier's scale",
            "below the smallest normal",
            "error, all",
            "error, ordinary",
        ],
        rows=rows,
        note="Shares of the ordinary values (all but the outliers); relative "
        "(Frobenius) error of an E4M3 round trip, of the whole tensor and of the "
        "ordinary values.",
        stamp="T = {tokens}, C = {channels}; outlier channels {outliers} and the "
        "element {element}, x {magnitude}",
        fields={
            "tokens": tokens,
            "channels": CHANNELS,
            "outliers": str(OUTLIER_CHANNELS),
            "element": str(MASSIVE_AT),
            "magnitude": f"{magnitude:g}",
        },
    )


def granularity_figure(
    magnitudes: tuple[float, ...] = MAGNITUDES, tokens: int = TOKENS
) -> Figure:
    """Error on the ordinary values against granularity, one line per magnitude.

    Args:
        magnitudes: outlier sizes, one line each.
        tokens: T, a multiple of 128.

    Returns:
        A matplotlib figure.
    """
    fig = Figure(figsize=(7, 3.6))
    ax = fig.add_subplot()
    names = list(GRANULARITIES)
    for magnitude in magnitudes:
        errors = granularity_stats(magnitude, tokens)
        ax.plot(
            names,
            [errors[n][1] for n in names],
            marker="o",
            label=f"outliers x {magnitude:g}",
        )
    ax.set_yscale("log")
    ax.set_ylabel("relative error, ordinary values")
    ax.set_xlabel("one E4M3 scale per ...")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _round(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` rounded to a format and back to fp32 (FP8: per-tensor scaled E4M3)."""
    if name == "fp32":
        return x
    if name == "tf32":
        return to_tf32(x)
    if name == "fp8":
        return dequantize_fp8(*quantize_fp8(x))
    return x.to(DTYPES[name]).float()


def matmul_format_table(gpu: str = "H100") -> Table:
    """A matmul with inputs rounded to each format, beside the format's peak."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 1024, generator=g)  # (M, K)
    b = torch.randn(1024, 128, generator=g)  # (K, N)
    exact = a.double() @ b.double()  # (M, N)
    fp32_peak = GPUS[gpu].peak_flops("fp32")
    rows = []
    for name in ("fp32", "tf32", "bf16", "fp16", "fp8"):
        mantissa = float_format("fp8 e4m3" if name == "fp8" else name).mantissa_bits
        peak = GPUS[gpu].peak_flops(name)
        error = relative_error(exact, _round(a, name) @ _round(b, name))
        label = "fp8 e4m3 (per tensor)" if name == "fp8" else name
        rows.append([label, mantissa, f"{peak / 1e12:g}", f"{peak / fp32_peak:.1f}"])
        rows[-1].append(f"{error:.1e}")
    return Table(
        columns=["inputs", "mantissa bits", "TFLOP/s", "x fp32", "matmul error"],
        rows=rows,
        note="Dense peaks from the datasheet (FP32 without tensor cores); error of "
        "a 128 x 1024 x 128 matmul, inputs rounded, products summed in fp32.",
        stamp=f"{GPUS[gpu].name}; PyTorch {torch.__version__.split('+')[0]}",
    )


def delayed_scaling_table(
    sizes: tuple[float, ...] = (1, 1, 1, 8, 8, 1), history_len: int = 4
) -> Table:
    """Delayed against current scaling on a tensor that jumps in size."""
    scaler = DelayedScaler(history_len)
    g = torch.Generator().manual_seed(0)
    rows = []
    for step, size in enumerate(sizes):
        x = size * torch.randn(128, 128, generator=g)  # (R, C)
        q, sigma = scaler.quantize(x)
        clipped = (x.abs() > E4M3_MAX * sigma).float().mean().item()
        delayed = relative_error(x, dequantize_fp8(q, sigma))
        current = relative_error(x, dequantize_fp8(*quantize_fp8(x)))
        rows.append([step, f"{x.abs().max():.1f}", f"{clipped:.1%}"])
        rows[-1] += [f"{delayed:.2%}", f"{current:.2%}"]
    return Table(
        columns=["step", "amax", "clipped", "error, delayed", "error, current"],
        rows=rows,
        note="Delayed: scale from the largest amax of the previous steps; current: "
        "from the tensor itself. E4M3, one scale per tensor.",
        stamp="history of {history} steps; 128 x 128 normal tensors scaled by {sizes}",
        fields={"history": history_len, "sizes": str(sizes)},
    )
