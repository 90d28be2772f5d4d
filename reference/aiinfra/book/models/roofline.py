"""What ``docs/models/roofline.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.models import (
    roofline,
)
from aiinfra.models.presets import preset
from aiinfra.report import Table

from .transformer import DEEPSEEK, LLAMA, SEQ_LEN

FA2_A100_SHARE = (0.50, 0.73)  # FlashAttention-2 forward, share of A100 peak (Abstract)


FA3_H100_TFLOPS = 740  # FlashAttention-3, FP16 forward on H100 (Abstract)


FA3_FP8_TFLOPS = 1200  # FlashAttention-3, FP8 "close to 1.2 PFLOPs/s" (Abstract)


def gpu_table() -> Table:
    """Datasheet peaks and ridge points of A100, H100, H200."""
    return roofline.gpu_table()


def roofline_table() -> Table:
    """Intensity of GEMMs and attention kernels, and the share of peak per GPU."""
    return roofline.roofline_table(SEQ_LEN)


def roofline_figure() -> Figure:
    """The rooflines of the three GPUs with the kernels on H100's."""
    return roofline.roofline_figure(SEQ_LEN)


def ridge(gpu: str) -> float:
    """Ridge point of a GPU of the table, FLOP per byte."""
    return GPUS[gpu].ridge


def gqa_decode_intensity() -> float:
    """FLOP per byte of Llama 3 8B's decode attention (GQA)."""
    return roofline.decode_attention(preset(LLAMA), SEQ_LEN).intensity


def mla_decode_intensity(query_tokens: int = 1) -> float:
    """FLOP per byte of DeepSeek-V2's absorbed MLA decode attention."""
    c = preset(DEEPSEEK)
    return roofline.decode_attention(c, SEQ_LEN, query_tokens=query_tokens).intensity


def deepseek_heads() -> int:
    """Query heads of DeepSeek-V2."""
    return preset(DEEPSEEK).n_heads


def flash_prefill_intensity() -> float:
    """FLOP per byte of FlashAttention's prefill of one head, N = 8192."""
    return roofline.prefill_attention(SEQ_LEN, 128).intensity


def standard_prefill_intensity() -> float:
    """FLOP per byte of standard attention's prefill of one head, N = 8192."""
    return roofline.prefill_attention(SEQ_LEN, 128, flash=False).intensity


def decode_batch_at_ridge(gpu: str = "H100") -> int:
    """Smallest batch whose d x d_ff decode GEMM reaches the ridge of ``gpu``."""
    c, target = preset(LLAMA), GPUS[gpu].ridge
    b = 1
    while roofline.matmul(b, c.d_model, c.d_ff).intensity < target:
        b += 1
    return b


def fa3_h100_share() -> float:
    """FlashAttention-3's published FP16 TFLOP/s over H100's dense BF16 peak."""
    return FA3_H100_TFLOPS * 1e12 / GPUS["H100"].bf16_flops


def fa2_a100_share_low() -> float:
    """FlashAttention-2's lowest published share of A100 peak."""
    return FA2_A100_SHARE[0]


def fa2_a100_share_high() -> float:
    """FlashAttention-2's highest published share of A100 peak."""
    return FA2_A100_SHARE[1]
