"""Hardware: accelerators, servers, cluster networks, their failures and budgets.

The accelerators' datasheet numbers are ground floor, read by every package:
:mod:`aiinfra.accelerators` (:data:`~aiinfra.accelerators.GPUS`,
:data:`~aiinfra.accelerators.ACCELERATORS`, re-exported here). Here, :mod:`.budget`
turns a model and its tokens into FLOPs and GPU-days (``C = 6ND``);
:mod:`.roofline_bench` measures this machine's roofline and :mod:`.matmul_triton` tiles
a matmul as GPU kernels do (:mod:`.gpu_memory`: an H100's memory levels); :mod:`.server`
models an HGX node (its ``nvidia-smi topo -m``, its paths) and its power from the node
to the facility; :mod:`.topology` sizes cluster networks (the fat-tree of Al-Fares et
al., a leaf-spine with oversubscription) and :mod:`.rails` a rail-optimised GPU cluster
and its scale-up domains; :mod:`.reliability` turns failure rates into checkpoint
intervals and goodput (Young 1974, Daly 2006) and reads the interruptions Llama 3
reported.
"""

from aiinfra.accelerators import ACCELERATORS, FORMATS, GPUS, Gpu, accelerator
from aiinfra.hardware.budget import gpu_days, implied_mfu, training_flops, wall_days
from aiinfra.hardware.rails import (
    GB200_NVL72,
    HGX_H100,
    ScaleUpDomain,
    all_to_all_seconds,
    rail_cluster,
)
from aiinfra.hardware.reliability import (
    LLAMA3_405B,
    cluster_mtbf,
    daly_interval,
    goodput,
    simulate_goodput,
    young_interval,
)
from aiinfra.hardware.server import HgxNode, facility_power, node_power
from aiinfra.hardware.topology import fat_tree, leaf_spine

__all__ = [
    "ACCELERATORS",
    "FORMATS",
    "GPUS",
    "Gpu",
    "accelerator",
    "GB200_NVL72",
    "HGX_H100",
    "LLAMA3_405B",
    "HgxNode",
    "ScaleUpDomain",
    "all_to_all_seconds",
    "cluster_mtbf",
    "daly_interval",
    "facility_power",
    "fat_tree",
    "gpu_days",
    "goodput",
    "implied_mfu",
    "leaf_spine",
    "node_power",
    "rail_cluster",
    "simulate_goodput",
    "training_flops",
    "wall_days",
    "young_interval",
]
