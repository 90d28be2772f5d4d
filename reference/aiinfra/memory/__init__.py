"""Where the memory of training goes: a calculator, and measurements that check it.

Model states (:mod:`.model_states`, ZeRO's formulas), activations
(:mod:`.activations`, Korthikanti et al. 2022), the calculator (:mod:`.calculator`),
exact measurement on a CPU (:mod:`.measure`, :mod:`.tiny_gpt`, :mod:`.experiments`)
and activation checkpointing (:mod:`.checkpoint`, :mod:`.segments`); :mod:`.tables`
and :mod:`.figures` show them and :mod:`.cli` is ``aiinfra memory``. Models are
described once, by :class:`aiinfra.models.config.TransformerConfig`;
:func:`~aiinfra.models.presets.preset` and
:func:`~aiinfra.models.params.count_parameters`, where every estimate starts, are
re-exported here.
"""

from aiinfra.memory.activations import (
    activation_bytes_per_layer,
    saved_activation_terms,
)
from aiinfra.memory.calculator import (
    MemoryEstimate,
    estimate_memory,
    memory_report,
    memory_table,
)
from aiinfra.memory.checkpoint import Checkpoint, checkpoint, checkpoint_sequential
from aiinfra.memory.measure import SavedTensorLog, model_state_bytes
from aiinfra.memory.model_states import (
    ModelStateBytes,
    model_states_bytes,
    zero_model_states_bytes,
)
from aiinfra.memory.segments import (
    checkpointed_peak_bytes,
    optimal_segments,
    segment_sizes,
    sqrt_rule,
)
from aiinfra.memory.tiny_gpt import TinyGPT, tiny_gpt_config
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset

__all__ = [
    "Checkpoint",
    "MemoryEstimate",
    "ModelStateBytes",
    "SavedTensorLog",
    "TinyGPT",
    "activation_bytes_per_layer",
    "checkpoint",
    "checkpoint_sequential",
    "checkpointed_peak_bytes",
    "count_parameters",
    "estimate_memory",
    "memory_report",
    "memory_table",
    "model_state_bytes",
    "model_states_bytes",
    "optimal_segments",
    "preset",
    "saved_activation_terms",
    "segment_sizes",
    "sqrt_rule",
    "tiny_gpt_config",
    "zero_model_states_bytes",
]
