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

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.comm.counter": ("CommCounter",),
        "aiinfra.parallel.context.ring_attention": (
            "RingAttention",
            "ring_attention",
        ),
        "aiinfra.parallel.context.ulysses": ("ulysses_attention",),
        "aiinfra.parallel.context.zigzag": (
            "shard_sequence",
            "unshard_sequence",
        ),
        "aiinfra.parallel.data.bucketed": ("BucketedDDP",),
        "aiinfra.parallel.data.naive": ("NaiveDDP",),
        "aiinfra.parallel.pipeline.executor": (
            "PipelineExecutor",
            "PipelineStage",
            "stage_layers",
        ),
        "aiinfra.parallel.pipeline.schedules": (
            "Action",
            "Schedule",
            "make_schedule",
        ),
        "aiinfra.parallel.pipeline.simulator": (
            "PipelineCosts",
            "simulate",
        ),
        "aiinfra.parallel.tensor.attention": ("TensorParallelAttention",),
        "aiinfra.parallel.tensor.layers": (
            "ColumnParallelLinear",
            "RowParallelLinear",
            "TensorParallelSwiGLU",
        ),
        "aiinfra.parallel.tensor.model": (
            "MEGATRON_PLAN",
            "SEQUENCE_PARALLEL_PLAN",
            "TensorParallelTransformer",
        ),
        "aiinfra.parallel.tensor.vocab": (
            "VocabParallelEmbedding",
            "vocab_parallel_cross_entropy",
        ),
        "aiinfra.parallel.zero.stage1": ("Zero1",),
        "aiinfra.parallel.zero.stage2": ("Zero2",),
        "aiinfra.parallel.zero.stage3": ("Zero3",),
    },
)
