"""Data, ZeRO, tensor, pipeline and context parallelism from torch.distributed.

One folder per way of splitting the work, in the book's order:

- :mod:`~aiinfra.parallel.data`: DDP, naive and bucketed, and its step on a model;
- :mod:`~aiinfra.parallel.zero`: ZeRO stages 1-3, each built on the one before;
- :mod:`~aiinfra.parallel.tensor`: Megatron's operators, parallel layers, a plan;
- :mod:`~aiinfra.parallel.pipeline`: schedules as data, a simulator, an executor;
- :mod:`~aiinfra.parallel.context`: ring attention, zig-zag shards, Ulysses.

:mod:`~aiinfra.parallel.toy` is the task every data-parallel example trains,
:mod:`~aiinfra.parallel.three_d` combines data, pipeline and tensor parallelism, and
:mod:`~aiinfra.parallel.cli` holds ``aiinfra bench ddp`` and ``aiinfra bench zero``.
"""

from aiinfra.comm.counter import CommCounter
from aiinfra.parallel.context.ring_attention import RingAttention, ring_attention
from aiinfra.parallel.context.ulysses import ulysses_attention
from aiinfra.parallel.context.zigzag import shard_sequence, unshard_sequence
from aiinfra.parallel.data.bucketed import BucketedDDP
from aiinfra.parallel.data.naive import NaiveDDP
from aiinfra.parallel.pipeline.executor import (
    PipelineExecutor,
    PipelineStage,
    stage_layers,
)
from aiinfra.parallel.pipeline.schedules import Action, Schedule, make_schedule
from aiinfra.parallel.pipeline.simulator import PipelineCosts, simulate
from aiinfra.parallel.tensor.attention import TensorParallelAttention
from aiinfra.parallel.tensor.layers import (
    ColumnParallelLinear,
    RowParallelLinear,
    TensorParallelSwiGLU,
)
from aiinfra.parallel.tensor.model import (
    MEGATRON_PLAN,
    SEQUENCE_PARALLEL_PLAN,
    TensorParallelTransformer,
)
from aiinfra.parallel.tensor.vocab import (
    VocabParallelEmbedding,
    vocab_parallel_cross_entropy,
)
from aiinfra.parallel.zero.stage1 import Zero1
from aiinfra.parallel.zero.stage2 import Zero2
from aiinfra.parallel.zero.stage3 import Zero3

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
