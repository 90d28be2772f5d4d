"""The cluster of the checkpoint and data-loading pages: a cost model.

Write time B / W, staging time (B / N) / PCIe bandwidth, and a step's time from its
FLOPs at an assumed MFU (:func:`aiinfra.models.flops.training_flops_per_token`,
:data:`aiinfra.accelerators.GPUS`).
"""

from __future__ import annotations

from aiinfra.accelerators import GPUS
from aiinfra.models.flops import training_flops_per_token
from aiinfra.models.presets import preset
from aiinfra.storage import training_checkpoint_bytes, write_seconds

#: PCIe 5.0 x16, one direction: 32 GT/s x 16 lanes x 128/130, bytes/s (the host
#: link of an H100 SXM); what staging a GPU's shard into host memory runs at.
PCIE5_X16_BANDWIDTH = 32e9 * 16 * 128 / 130 / 8
CLUSTER_GPU = "H100"
#: Assumed model FLOP utilisation of the cluster step (Llama 3 reports 38-43 %).
CLUSTER_MFU = 0.4
CLUSTER_GPUS = 1024
CLUSTER_SEQ = 8192
#: Tokens per step of the cluster model: 2,048 sequences of 8,192 tokens.
CLUSTER_BATCH_TOKENS = 2048 * CLUSTER_SEQ


def save_costs(model: str, bandwidth: float) -> dict[str, float]:
    """Step (s), sync stall (s) and async stall (ms) of ``model``'s save.

    Args:
        model: a preset name (:func:`aiinfra.models.presets.preset`).
        bandwidth: the aggregate storage bandwidth, bytes/s.
    """
    size = training_checkpoint_bytes(preset(model)).total
    flops = training_flops_per_token(preset(model), CLUSTER_SEQ) * CLUSTER_BATCH_TOKENS
    gpu = GPUS[CLUSTER_GPU]
    return {
        "step_s": flops / (CLUSTER_GPUS * CLUSTER_MFU * gpu.bf16_flops),
        "sync_s": write_seconds(size, bandwidth),
        "stage_ms": 1e3 * size / CLUSTER_GPUS / PCIE5_X16_BANDWIDTH,
    }
