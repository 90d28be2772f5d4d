"""Arithmetic intensity and the roofline: which kernels memory bandwidth bounds.

A kernel that does ``F`` FLOPs and moves ``Q`` bytes between HBM and the chip has
arithmetic intensity ``I = F / Q``; a GPU with peak ``F_max`` FLOP/s and bandwidth
``W`` bytes/s runs it at most at ``min(F_max, I W)`` (Williams, Waterman &
Patterson 2009). The ridge point ``F_max / W`` separates memory-bound kernels (left)
from compute-bound ones. Bytes here are the compulsory traffic, each operand read
and each result written once: the best a kernel can do, so the intensities are
upper bounds. Peaks are dense BF16 and HBM bandwidths from NVIDIA's datasheets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiinfra.accelerators import GPUS
from aiinfra.models.attention.kv_cache_size import elements_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); counting does not
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Kernel:
    """FLOPs and compulsory HBM bytes of one kernel call."""

    name: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOP per byte."""
        return self.flops / self.bytes


def matmul(m: int, k: int, n: int, bytes_per_element: int = 2) -> Kernel:
    """``C = A B`` with ``A`` of ``m x k`` and ``B`` of ``k x n``: ``2 m k n`` FLOPs.

    Raises:
        ValueError: a size is not a positive integer.
    """
    _check_positive(m=m, k=k, n=n, bytes_per_element=bytes_per_element)
    moved = (m * k + k * n + m * n) * bytes_per_element  # read A, B; write C
    return Kernel(f"matmul {m} x {k} x {n}", 2 * m * k * n, moved)


def prefill_attention(
    seq_len: int, head_dim: int, flash: bool = True, bytes_per_element: int = 2
) -> Kernel:
    """One head attending over ``T`` tokens (no mask): ``4 T^2 d`` FLOPs.

    Args:
        seq_len: ``T``.
        head_dim: ``d``.
        flash: only ``Q, K, V`` read and ``O`` written; otherwise also ``S``
            written, read by the softmax, ``P`` written and read by ``P V``.
        bytes_per_element: 2 for bf16.

    Raises:
        ValueError: a size is not a positive integer.
    """
    _check_positive(
        seq_len=seq_len, head_dim=head_dim, bytes_per_element=bytes_per_element
    )
    N, d = seq_len, head_dim
    elements = 4 * N * d + (0 if flash else 4 * N * N)
    name = "FlashAttention" if flash else "standard attention"
    return Kernel(f"{name}, T = {N}", 4 * N * N * d, elements * bytes_per_element)


def decode_attention(
    c: TransformerConfig,
    context: int,
    absorbed: bool = True,
    query_tokens: int = 1,
    bytes_per_element: int = 2,
) -> Kernel:
    """One layer's attention for ``query_tokens`` new tokens of one sequence.

    The cached keys and values of ``T`` tokens are read once; each query head
    takes ``2 T`` FLOPs per score width and per value width.

    Args:
        c: the model; MHA, GQA or MQA by ``n_kv_heads``, or MLA.
        context: ``T``, cached tokens.
        absorbed: MLA only: attend over the latents (``W^UK``, ``W^UV`` absorbed);
            otherwise every head's key and value are cached expanded, as MHA.
        query_tokens: new tokens per step (1; more with speculative decoding).
        bytes_per_element: 2 for a bf16 cache.

    Raises:
        ValueError: a size is not a positive integer.
    """
    _check_positive(
        context=context,
        query_tokens=query_tokens,
        bytes_per_element=bytes_per_element,
    )
    S, H = context, c.n_heads
    if c.is_mla and absorbed:
        d_qk, d_v = c.kv_lora_rank + c.rope_head_dim, c.kv_lora_rank
        cached = elements_per_token(c) // c.n_layers  # d_c + d_h^R, shared by heads
    elif c.is_mla:
        d_qk, d_v = c.head_dim + c.rope_head_dim, c.head_dim
        cached = H * (d_qk + d_v)  # expanded keys and values, one per head
    else:
        d_qk = d_v = c.head_dim
        cached = elements_per_token(c) // c.n_layers  # 2 G D
    flops = 2 * H * query_tokens * S * (d_qk + d_v)
    return Kernel("decode attention", flops, cached * S * bytes_per_element)


def roofline_kernels(context: int = 8192) -> list[tuple[Kernel, str, int | str]]:
    """The kernels of the book's roofline, each with its model and batch."""
    llama, deepseek = preset("llama-3-8b"), preset("deepseek-v2")
    d, d_ff = llama.d_model, llama.d_ff
    mha = dataclasses.replace(llama, n_kv_heads=llama.n_heads)  # one KV head each
    rows = [
        ("training GEMM", matmul(d, d, d), "Llama 3 8B", ""),
        ("decode GEMM, one sequence", matmul(1, d, d_ff), "Llama 3 8B", 1),
        ("decode GEMM, batched", matmul(64, d, d_ff), "Llama 3 8B", 64),
        ("prefill, standard attention", prefill_attention(context, 128, False), "", ""),
        ("prefill, FlashAttention", prefill_attention(context, 128), "", ""),
        ("decode, MHA", decode_attention(mha, context), "Llama 3 8B as MHA", ""),
        ("decode, GQA", decode_attention(llama, context), "Llama 3 8B", ""),
        (
            "decode, MLA expanded",
            decode_attention(deepseek, context, False),
            "DeepSeek-V2",
            "",
        ),
        (
            "decode, MLA absorbed",
            decode_attention(deepseek, context),
            "DeepSeek-V2",
            "",
        ),
    ]
    return [(Kernel(name, k.flops, k.bytes), model, b) for name, k, model, b in rows]


def gpu_table() -> Table:
    """Datasheet peaks of the GPUs and their ridge points."""
    rows = [
        [
            g.name,
            g.bf16_flops / 1e12,
            g.hbm_bandwidth / 1e12,
            g.hbm_bytes // 10**9,
            g.sms,
            round(g.ridge),
        ]
        for g in GPUS.values()
    ]
    note = (
        "Dense BF16 tensor-core peak (TFLOP/s = 1e12 FLOP/s), HBM bandwidth "
        "(TB/s = 1e12 bytes/s) and capacity (GB = 1e9 bytes) from NVIDIA's "
        "datasheets; ridge = peak / bandwidth."
    )
    columns = ["GPU", "BF16 TFLOP/s", "HBM TB/s", "HBM GB", "SMs", "ridge FLOP/byte"]
    return Table(columns, rows, note)


def roofline_table(context: int = 8192) -> Table:
    """Intensity of each kernel and the share of peak each GPU can reach."""
    rows = [
        [k.name, model, batch, round(k.intensity, 1)]
        + [f"{g.attainable(k.intensity) / g.bf16_flops:.1%}" for g in GPUS.values()]
        for k, model, batch in roofline_kernels(context)
    ]
    note = (
        "FLOP per byte of compulsory HBM traffic, bf16; each GPU column gives "
        "min(1, intensity / ridge), the most of the BF16 peak the kernel can reach. "
        "GEMMs: d x d (training) and batch x d by d x d_ff (decode); attention: "
        "one head of width 128 (prefill), one layer of one sequence (decode)."
    )
    columns = ["kernel", "model", "batch", "FLOP / byte"] + list(GPUS)
    stamp, fields = "N = S = {context} tokens", {"context": context}
    return Table(columns, rows, note, stamp, fields=fields)


def roofline_figure(context: int = 8192) -> Figure:
    """Attainable TFLOP/s against intensity for each GPU, the kernels on H100's."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 4), layout="constrained")
    ax = fig.add_subplot()
    xs = [2.0**e for e in range(-1, 15)]
    for gpu, style in zip(GPUS.values(), ("-", "--", ":"), strict=True):
        ys = [gpu.attainable(x) / 1e12 for x in xs]
        ax.loglog(xs, ys, style, color="black", label=gpu.name, linewidth=1.2)
    h100 = GPUS["H100"]
    markers = "ov^<>sDPX"
    for (kernel, _, _), marker in zip(roofline_kernels(context), markers, strict=False):
        y = h100.attainable(kernel.intensity) / 1e12
        ax.loglog([kernel.intensity], [y], marker, label=kernel.name, markersize=7)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable TFLOP/s (BF16)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    return fig


def _check_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
