"""Data, ZeRO and tensor parallelism, built from ``torch.distributed`` collectives.

- :mod:`~aiinfra.parallel.ddp_naive`: all-reduce every gradient after backward;
- :mod:`~aiinfra.parallel.ddp_bucketed`: buckets all-reduced during backward, and
  gradient accumulation without communication (``no_sync``);
- :mod:`~aiinfra.parallel.zero1`, :mod:`~aiinfra.parallel.zero2`,
  :mod:`~aiinfra.parallel.zero3`: ZeRO stages 1-3, each built on the one before;
- :mod:`~aiinfra.parallel.tensor_parallel_ops`,
  :mod:`~aiinfra.parallel.tensor_parallel`: Megatron's ``f``/``g`` operators (and their
  sequence-parallel counterparts), column- and row-parallel linear layers and the
  tensor-parallel SwiGLU MLP;
- :mod:`~aiinfra.parallel.comm_counter`: collectives that count what they send.

Measurements and comparisons live in ``bench`` (DDP step time), ``zero_memory``
(bytes and traffic against the paper), ``zero_compare`` (against DeepSpeed and FSDP2)
and ``zero_results`` (the committed results file the book reads).
"""

from aiinfra.parallel.comm_counter import CommCounter
from aiinfra.parallel.ddp_bucketed import BucketedDDP
from aiinfra.parallel.ddp_naive import NaiveDDP
from aiinfra.parallel.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    TensorParallelSwiGLU,
)
from aiinfra.parallel.zero1 import Zero1
from aiinfra.parallel.zero2 import Zero2
from aiinfra.parallel.zero3 import Zero3

__all__ = [
    "BucketedDDP",
    "ColumnParallelLinear",
    "CommCounter",
    "NaiveDDP",
    "RowParallelLinear",
    "TensorParallelSwiGLU",
    "Zero1",
    "Zero2",
    "Zero3",
]
