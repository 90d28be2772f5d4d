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

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.memory.activations": (
            "activation_bytes_per_layer",
            "saved_activation_terms",
        ),
        "aiinfra.memory.calculator": (
            "MemoryEstimate",
            "estimate_memory",
            "memory_report",
            "memory_table",
        ),
        "aiinfra.memory.checkpoint": (
            "Checkpoint",
            "checkpoint",
            "checkpoint_sequential",
        ),
        "aiinfra.memory.measure": (
            "SavedTensorLog",
            "model_state_bytes",
        ),
        "aiinfra.memory.model_states": (
            "ModelStateBytes",
            "model_states_bytes",
            "zero_model_states_bytes",
        ),
        "aiinfra.memory.segments": (
            "checkpointed_peak_bytes",
            "optimal_segments",
            "segment_sizes",
            "sqrt_rule",
        ),
        "aiinfra.memory.tiny_gpt": (
            "TinyGPT",
            "tiny_gpt_config",
        ),
        "aiinfra.models.params": ("count_parameters",),
        "aiinfra.models.presets": ("preset",),
    },
)
