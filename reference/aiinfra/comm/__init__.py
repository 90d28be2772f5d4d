"""Collective communication built from point-to-point messages.

Every collective in this subpackage is written with ``send``/``recv`` (through
:func:`~aiinfra.comm.primitives.sendrecv`) and local arithmetic only, so each
algorithm of the chapter can be read, run on a laptop over gloo, and checked against
``torch.distributed``'s own collectives, which the tests use as ground truth:

- :mod:`~aiinfra.comm.ring`: ring all-reduce, reduce-scatter and all-gather;
- :mod:`~aiinfra.comm.doubling`: recursive doubling and Rabenseifner's
  halving-doubling all-reduce, for any number of ranks;
- :mod:`~aiinfra.comm.tree`: binomial-tree broadcast and reduce;
- :mod:`~aiinfra.comm.alltoall`: pairwise-exchange all-to-all;
- :mod:`~aiinfra.comm.hierarchical`: the two-level all-reduce of a multi-node cluster.

The signatures mirror ``torch.distributed`` (in place, ``op``, ``group``) and the
functions run on any backend (gloo on CPU, NCCL on GPU). Each validates its arguments
before the first message and, unless ``check_consistency=False``, checks that all
ranks passed the same sizes, dtype, op and root. The cost model, benchmark and figures
of the chapter live in the submodules ``cost``, ``bench`` and ``figures``, the cost
of what NCCL runs (multi-rail rings, double binary trees, in-network reduction) in
``nccl_model``; the
step-by-step simulations of the algorithms in ``schedules`` and their drawings (book
figures and deck frames) in ``steps``. The chapter's second part adds the incast and
congestion simulation of a switch port (lossy, PFC, ECN/DCQCN) in ``incast``, the
NCCL environment variables and log labels in ``nccl_env``, and reproducible hangs
with a per-rank flight recorder that names the culprit in ``hangs`` and
``flight_recorder``.
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
