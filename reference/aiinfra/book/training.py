"""Every value, table and figure of the training chapter (``docs/training``).

The running example is Llama 3 8B (its preset, :mod:`aiinfra.models.presets`) and
ZeRO's own example, 7.5 billion parameters on 64 ranks (Rajbhandari et al. 2020,
Fig. 1). Measured DDP and ZeRO numbers read the ``ddp`` and ``zero`` results
(:mod:`aiinfra.results`); the ZeRO memory table spawns four gloo ranks at build time.
"""

from __future__ import annotations

import functools

from matplotlib.figure import Figure

from aiinfra.memory import figures as memory_figures
from aiinfra.memory import model_states
from aiinfra.memory import tables as memory_tables
from aiinfra.memory.calculator import estimate_memory, memory_report
from aiinfra.memory.model_states import model_states_bytes, zero_model_states_bytes
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.parallel import bench as ddp_bench
from aiinfra.parallel import figures as parallel_figures
from aiinfra.parallel import zero_memory, zero_results
from aiinfra.parallel.toy import mlp
from aiinfra.parallel.zero_compare import WIDTHS
from aiinfra.precision import figures as precision_figures
from aiinfra.precision import formats, numerics
from aiinfra.precision import tables as precision_tables
from aiinfra.precision.formats import float_format, ieee_format
from aiinfra.precision.loss_scaler import DynamicLossScaler
from aiinfra.report import Table

GIB, MIB = 2**30, 2**20
EXAMPLE = "llama-3-8b"  # the chapter's running example
ZERO_PSI, ZERO_RANKS = 7_500_000_000, 64  # ZeRO's example (its Fig. 1)
DDP_BAR = ddp_bench.BAR  # the tests hold the committed results to it
OVERLAP_WIDTHS = (32, 64, 64, 64, 64, 32)  # the toy MLP of the overlap timeline
OVERLAP_BUCKET_BYTES = 20_000  # its bucket cap: five buckets
DDP_ALL_REDUCE_LATENCY = parallel_figures.ALL_REDUCE_LATENCY  # its cost model
DDP_ALL_REDUCE_TIME = parallel_figures.ALL_REDUCE_TIME
ZERO_FIGURE_RANKS = 4  # N_d of the ZeRO stages figure
ADAM_K = model_states.ADAM_STATE_BYTES  # K, bytes/parameter: mixed-precision Adam

# memory.rst


def llama_parameters() -> int:
    """Parameters of Llama 3 8B."""
    return count_parameters(preset(EXAMPLE)).total


def llama_bf16_weights_gib() -> float:
    """Llama 3 8B's weights in bf16, GiB."""
    return 2 * llama_parameters() / GIB


def llama_model_states_gib() -> float:
    """Llama 3 8B's mixed-precision Adam model states (16 bytes each), GiB."""
    return model_states_bytes(llama_parameters()).total / GIB


def zero_example_gb(stage: int) -> float:
    """Model states per rank of ZeRO's example at ``stage`` (0-3), GB."""
    return zero_model_states_bytes(ZERO_PSI, stage, ZERO_RANKS).total / 1e9


def presets_table() -> Table:
    """Shape, parameters and model states of every dense preset."""
    return memory_tables.presets_table()


def llama_activations_gib_8k() -> float:
    """Llama 3 8B's activations at 8192 tokens, no recomputation, GiB."""
    return estimate_memory(preset(EXAMPLE), seq=8192).activations / GIB


def recompute_table() -> Table:
    """Activations per layer under each recomputation strategy."""
    return memory_tables.recompute_table()


def memory_vs_seq_figure() -> Figure:
    """Memory of one rank against sequence length, Llama 3 8B."""
    return memory_figures.memory_vs_seq_figure()


def measured_activations_table() -> Table:
    """Saved-for-backward bytes of a tiny GPT layer, measured and predicted."""
    return memory_tables.measured_activations_table()


def measured_model_states_table() -> Table:
    """Model-state bytes measured from real tensors against the formula."""
    return memory_tables.measured_model_states_table()


def segments_figure() -> Figure:
    """Measured peak of checkpointed segments against the segment count."""
    return memory_figures.segments_figure()


def llama_memory_report() -> Table:
    """What ``aiinfra memory`` prints for Llama 3 8B at 8192 tokens, ZeRO-1, 8 ranks."""
    return memory_report(
        preset(EXAMPLE), EXAMPLE, seq=8192, recompute="selective", zero=1, dp=8
    )


# mixed_precision.rst


def fp8_e4m3_max() -> float:
    """The largest fp8 e4m3 (OCP, no infinities) value, from ``torch.finfo``."""
    return float_format("fp8 e4m3").max


def ieee_e4m3_max() -> float:
    """The largest value an IEEE-style e4m3 (with infinities) would have."""
    return ieee_format("e4m3", 4, 3).max


def fp16_max() -> float:
    """The largest fp16 value."""
    return float_format("fp16").max


def fp16_min_subnormal() -> float:
    """The smallest positive fp16 value (a subnormal)."""
    return float_format("fp16").min_subnormal


def bit_layout_figure() -> Figure:
    """Sign, exponent and mantissa bits of every format."""
    return precision_figures.bit_layout_figure()


def formats_table() -> Table:
    """Range and precision of every format."""
    return formats.formats_table()


def numerics_table() -> Table:
    """What each format does to values across the range."""
    return numerics.numerics_table()


def loss_scale_trace() -> Table:
    """Our loss scaler step by step beside ``torch.amp.GradScaler``."""
    return precision_tables.loss_scale_trace()


def master_weights_table() -> Table:
    """Small updates in bf16 with and without fp32 master weights."""
    return precision_tables.master_weights_table()


# ddp.rst


def ddp_parameters() -> int:
    """Parameters of the MLP the DDP benchmark trains."""
    return ddp_bench.n_params()


def ddp_gradient_mib() -> float:
    """Its fp32 gradients, MiB."""
    return 4 * ddp_parameters() / MIB


def ddp_step_time_figure() -> Figure:
    """Measured step time per variant and against bucket size."""
    return ddp_bench.ddp_step_time_figure()


def ddp_results_table() -> Table:
    """Median step time per variant and bucket size."""
    return ddp_bench.results_table()


def bucketed_over_ddp() -> float:
    """Our bucketed DDP's step time over DistributedDataParallel's (25 MiB)."""
    return ddp_bench.bucketed_over_ddp()


def best_bucket_mib() -> float:
    """The bucket size at which our bucketed DDP was fastest, MiB."""
    return ddp_bench.best_bucket_mib()


def step_time_ms(impl: str, best_bucket: bool = False) -> float:
    """Median step time of ``impl`` (largest bucket, or the best one), ms."""
    bucket = ddp_bench.best_bucket_mib(impl) if best_bucket else None
    return ddp_bench.step_time_ms(impl, bucket)


def overlap_parameters() -> int:
    """Parameters of the MLP of the overlap timeline."""
    return sum(p.numel() for p in mlp(OVERLAP_WIDTHS).parameters())


def overlap_step(bucket_bytes: int = OVERLAP_BUCKET_BYTES) -> float:
    """Step time of the overlap timeline with buckets of ``bucket_bytes``, units."""
    return parallel_figures.simulate_overlap(mlp(OVERLAP_WIDTHS), bucket_bytes).step


def overlap_saved_percent() -> float:
    """What overlap saves against sending every bucket after backward, percent."""
    t = parallel_figures.simulate_overlap(mlp(OVERLAP_WIDTHS), OVERLAP_BUCKET_BYTES)
    return 100 * t.saved / t.sequential


def overlap_figure() -> Figure:
    """Backward and bucket all-reduces of one step of the toy MLP."""
    return parallel_figures.overlap_figure(OVERLAP_WIDTHS, OVERLAP_BUCKET_BYTES)


def overlap_frames() -> list[Figure]:
    """The same, one frame per all-reduced bucket."""
    return parallel_figures.overlap_frames(OVERLAP_WIDTHS, OVERLAP_BUCKET_BYTES)


# zero.rst


def zero_stages_figure() -> Figure:
    """Bytes per parameter on each rank, DDP and ZeRO stages 1-3."""
    return parallel_figures.zero_stage_figure(ZERO_FIGURE_RANKS)


def zero_stages_frames() -> list[Figure]:
    """The same, one frame per stage."""
    return parallel_figures.zero_stage_frames(ZERO_FIGURE_RANKS)


@functools.cache
def _zero_measurements() -> tuple[dict, ...]:
    return tuple(zero_memory.measure_zero())


def zero_parameters() -> int:
    """Parameters of the MLP whose ZeRO memory is measured."""
    return _zero_measurements()[0]["psi"]


def zero_padded_parameters() -> int:
    """The same, padded to whole shards of every unit."""
    return _zero_measurements()[0]["psi_padded"]


def zero_memory_table() -> Table:
    """Model states per rank measured on four gloo ranks, beside the formulas."""
    return zero_memory.memory_table(list(_zero_measurements()))


def zero_compare_parameters() -> int:
    """Parameters of the MLP that ours, DeepSpeed and FSDP2 train alike."""
    return sum(p.numel() for p in mlp(WIDTHS).parameters())


def zero_loss_table() -> Table:
    """First and last loss of every implementation and its gap to one process."""
    return zero_results.loss_table()


def zero_max_loss_gap() -> float:
    """The largest loss gap to one process over implementations and steps."""
    return zero_results.max_loss_gap()


def zero_estimator_table() -> Table:
    """DeepSpeed's memory estimates beside the paper's formulas."""
    return zero_results.estimator_table()


# questions.rst


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
