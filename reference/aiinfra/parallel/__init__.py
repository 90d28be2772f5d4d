"""Data, ZeRO, tensor, pipeline and context parallelism from torch.distributed.

- :mod:`~aiinfra.parallel.ddp_naive`: all-reduce every gradient after backward;
- :mod:`~aiinfra.parallel.ddp_bucketed`: buckets all-reduced during backward, and
  gradient accumulation without communication (``no_sync``);
- :mod:`~aiinfra.parallel.zero1`, :mod:`~aiinfra.parallel.zero2`,
  :mod:`~aiinfra.parallel.zero3`: ZeRO stages 1-3, each built on the one before;
- :mod:`~aiinfra.parallel.tensor_parallel_ops`,
  :mod:`~aiinfra.parallel.tensor_parallel`: Megatron's ``f``/``g`` operators (and their
  sequence-parallel counterparts), column- and row-parallel linear layers and the
  tensor-parallel SwiGLU MLP;
- :mod:`~aiinfra.parallel.tensor_parallel_attention`,
  :mod:`~aiinfra.parallel.vocab_parallel`,
  :mod:`~aiinfra.parallel.tensor_parallel_model`: attention split by heads, the
  vocabulary-parallel embedding and cross-entropy, and a plan (module name -> style)
  that splits the package's Transformer; :mod:`~aiinfra.parallel.tensor_parallel_torch`
  applies the same plan with PyTorch's ``parallelize_module``;
- :mod:`~aiinfra.parallel.pipeline_schedules`, :mod:`~aiinfra.parallel.pipeline_sim`,
  :mod:`~aiinfra.parallel.pipeline_exec`, :mod:`~aiinfra.parallel.pipeline_figures`:
  GPipe, 1F1B, interleaved 1F1B and ZB-H1 as data, a replay on a cost model, and an
  executor over point-to-point sends;
- :mod:`~aiinfra.parallel.ring_attention`, :mod:`~aiinfra.parallel.zigzag`,
  :mod:`~aiinfra.parallel.ulysses`: context parallelism, ring attention over
  zig-zag sequence shards and DeepSpeed-Ulysses' all-to-all to head shards;
- :mod:`~aiinfra.parallel.comm_counter`: collectives that count what they send.

Measurements and comparisons live in ``bench`` (DDP step time), ``zero_memory``
(bytes and traffic against the paper), ``zero_compare`` (against DeepSpeed and FSDP2)
and ``zero_results`` (the committed results file the book reads).
"""

from aiinfra.parallel.comm_counter import CommCounter
from aiinfra.parallel.ddp_bucketed import BucketedDDP
from aiinfra.parallel.ddp_naive import NaiveDDP
from aiinfra.parallel.pipeline_exec import PipelineExecutor, PipelineStage, stage_layers
from aiinfra.parallel.pipeline_schedules import Action, Schedule, make_schedule
from aiinfra.parallel.pipeline_sim import PipelineCosts, simulate
from aiinfra.parallel.ring_attention import RingAttention, ring_attention
from aiinfra.parallel.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    TensorParallelSwiGLU,
)
from aiinfra.parallel.tensor_parallel_attention import TensorParallelAttention
from aiinfra.parallel.tensor_parallel_model import (
    MEGATRON_PLAN,
    SEQUENCE_PARALLEL_PLAN,
    TensorParallelTransformer,
)
from aiinfra.parallel.ulysses import ulysses_attention
from aiinfra.parallel.vocab_parallel import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)
from aiinfra.parallel.zero1 import Zero1
from aiinfra.parallel.zero2 import Zero2
from aiinfra.parallel.zero3 import Zero3
from aiinfra.parallel.zigzag import shard_sequence, unshard_sequence

__all__ = [
    "Action",
    "PipelineCosts",
    "PipelineExecutor",
    "PipelineStage",
    "Schedule",
    "make_schedule",
    "simulate",
    "stage_layers",
    "MEGATRON_PLAN",
    "SEQUENCE_PARALLEL_PLAN",
    "BucketedDDP",
    "ColumnParallelLinear",
    "CommCounter",
    "NaiveDDP",
    "RingAttention",
    "RowParallelLinear",
    "TensorParallelAttention",
    "TensorParallelSwiGLU",
    "TensorParallelTransformer",
    "VocabParallelEmbedding",
    "Zero1",
    "Zero2",
    "Zero3",
    "ring_attention",
    "shard_sequence",
    "ulysses_attention",
    "unshard_sequence",
    "vocab_parallel_cross_entropy",
]
