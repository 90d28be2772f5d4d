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

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.comm.alltoall": ("pairwise_all_to_all",),
        "aiinfra.comm.doubling": (
            "rabenseifner_all_reduce",
            "recursive_doubling_all_reduce",
        ),
        "aiinfra.comm.hierarchical": (
            "Hierarchy",
            "hierarchical_all_reduce",
        ),
        "aiinfra.comm.ring": (
            "ring_all_gather",
            "ring_all_reduce",
            "ring_reduce_scatter",
        ),
        "aiinfra.comm.tree": (
            "binomial_broadcast",
            "binomial_reduce",
        ),
    },
)
