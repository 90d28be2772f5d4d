"""Collective communication built from point-to-point messages, and what it costs.

Every collective here is written with ``send``/``recv`` (:mod:`.primitives`) and local
arithmetic only, mirrors ``torch.distributed`` (in place, ``op``, ``group``), runs on
gloo and NCCL, and checks on every rank that all ranks passed the same arguments
before the first message (``_validate``): :mod:`.ring` (ring all-reduce,
reduce-scatter, all-gather), :mod:`.doubling` (recursive doubling, Rabenseifner),
:mod:`.tree` (binomial broadcast and reduce), :mod:`.alltoall` and
:mod:`.hierarchical` (two levels). :mod:`.counter` counts what the parallelisms'
collectives send. The cost models are :mod:`.cost` and :mod:`.nccl_model` (NCCL's
rings, double binary trees, in-network reduction); :mod:`.schedules` simulates the
algorithms step by step and :mod:`.steps` and :mod:`.figures` draw them;
:mod:`.bench`, :mod:`.paired` and :mod:`.results` measure busbw; :mod:`.incast` a
switch port's congestion; :mod:`.nccl_env` NCCL's variables and log labels (on the
log in ``data/``); :mod:`.hangs` and :mod:`.flight_recorder` reproducible hangs.
"""

from aiinfra.comm.alltoall import pairwise_all_to_all
from aiinfra.comm.doubling import rabenseifner_all_reduce, recursive_doubling_all_reduce
from aiinfra.comm.hierarchical import Hierarchy, hierarchical_all_reduce
from aiinfra.comm.ring import ring_all_gather, ring_all_reduce, ring_reduce_scatter
from aiinfra.comm.tree import binomial_broadcast, binomial_reduce

__all__ = [
    "Hierarchy",
    "binomial_broadcast",
    "binomial_reduce",
    "hierarchical_all_reduce",
    "pairwise_all_to_all",
    "rabenseifner_all_reduce",
    "recursive_doubling_all_reduce",
    "ring_all_gather",
    "ring_all_reduce",
    "ring_reduce_scatter",
]
