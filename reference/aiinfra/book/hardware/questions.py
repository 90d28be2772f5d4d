"""The values of the hardware chapter's questions (``docs/hardware/questions.rst``)."""

from __future__ import annotations

from aiinfra.accelerators import GPUS
from aiinfra.hardware import reliability as rel
from aiinfra.hardware.topology import fat_tree

_BF16_BYTES = 2
QUESTION_RADIX = 64  # switch ports of the fat-tree question
QUESTION_CHECKPOINT_S = 60.0  # checkpoint cost of the interval question, seconds


def decode_intensity() -> float:
    """FLOP per byte of a batch-1 decode matmul: 2 FLOPs per 2-byte BF16 weight."""
    return 2 / _BF16_BYTES


def h100_ridge_flop_per_byte() -> float:
    """The H100 SXM's dense BF16 ridge point, FLOP per byte."""
    return GPUS["H100"].ridge


def decode_share_of_peak_pct() -> float:
    """Percent of the H100's peak a batch-1 decode matmul can reach at most."""
    h100 = GPUS["H100"]
    return 100 * h100.attainable(decode_intensity()) / h100.bf16_flops


def question_radix() -> int:
    """The switch radix of the fat-tree question."""
    return QUESTION_RADIX


def fat_tree_hosts() -> int:
    """Hosts of the three-tier fat-tree of radix-64 switches, ``k^3/4``."""
    return fat_tree(QUESTION_RADIX).hosts


def fat_tree_switches() -> int:
    """Its switches, ``5k^2/4``."""
    return fat_tree(QUESTION_RADIX).switches


def question_checkpoint_s() -> float:
    """The checkpoint cost of the interval question, seconds."""
    return QUESTION_CHECKPOINT_S


def question_mtbf_hours() -> float:
    """Llama 3 405B's job MTBF from its unexpected interruptions, hours."""
    return rel.interruption_rates(rel.LLAMA3_405B).job_mtbf_hours


def young_minutes() -> float:
    """Young's interval for a 60 s checkpoint at that MTBF, minutes."""
    mtbf_s = question_mtbf_hours() * 3600
    return rel.young_interval(QUESTION_CHECKPOINT_S, mtbf_s) / 60


def young_overhead_pct() -> float:
    """Time spent writing checkpoints at Young's interval, percent of the work."""
    return 100 * QUESTION_CHECKPOINT_S / (young_minutes() * 60)
