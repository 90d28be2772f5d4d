"""What ``docs/training/questions.rst`` shows: its values, tables, figures."""

from __future__ import annotations

from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.data import figures as parallel_figures
from aiinfra.parallel.toy import mlp
from aiinfra.precision.loss_scaler import DynamicLossScaler

from .ddp import OVERLAP_BUCKET_BYTES, OVERLAP_WIDTHS
from .memory import GIB, llama_parameters
from .mixed_precision import fp16_max


def overlap_step(bucket_bytes: int = OVERLAP_BUCKET_BYTES) -> float:
    """Step time of the overlap timeline with buckets of ``bucket_bytes``, units."""
    return parallel_figures.simulate_overlap(mlp(OVERLAP_WIDTHS), bucket_bytes).step


def llama_zero3_min_ranks(gib: float) -> int:
    """Fewest ranks whose ``gib`` GiB each hold Llama 3 8B's states under ZeRO-3."""
    n = 1
    while zero_model_states_bytes(llama_parameters(), 3, n).total > gib * GIB:
        n += 1
    return n


def llama_zero_gib(stage: int, ranks: int) -> float:
    """Llama 3 8B's model states per rank under ZeRO ``stage`` on ``ranks``, GiB."""
    return zero_model_states_bytes(llama_parameters(), stage, ranks).total / GIB


def loss_scale() -> float:
    """The loss scaler's initial scale S (``GradScaler``'s default)."""
    return DynamicLossScaler().get_scale()


def largest_scaled_fp16_gradient() -> float:
    """The largest gradient whose product with the initial S is a finite fp16."""
    return fp16_max() / loss_scale()
