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

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.accelerators": (
            "ACCELERATORS",
            "FORMATS",
            "GPUS",
            "Gpu",
            "accelerator",
        ),
        "aiinfra.hardware.budget": (
            "gpu_days",
            "implied_mfu",
            "training_flops",
            "wall_days",
        ),
        "aiinfra.hardware.rails": (
            "GB200_NVL72",
            "HGX_H100",
            "ScaleUpDomain",
            "all_to_all_seconds",
            "rail_cluster",
        ),
        "aiinfra.hardware.reliability": (
            "LLAMA3_405B",
            "cluster_mtbf",
            "daly_interval",
            "goodput",
            "simulate_goodput",
            "young_interval",
        ),
        "aiinfra.hardware.server": (
            "HgxNode",
            "facility_power",
            "node_power",
        ),
        "aiinfra.hardware.topology": (
            "fat_tree",
            "leaf_spine",
        ),
    },
)
