"""The cluster side of ``docs/communication/checkpoints.rst``: a cost model.

Write time B / W, staging time (B / N) / PCIe bandwidth, and a step's time from its
FLOPs at an assumed MFU (:func:`aiinfra.models.flops.training_flops_per_token`,
:data:`aiinfra.hardware.specs.GPUS`).
"""

from __future__ import annotations

from aiinfra.hardware.specs import GPUS
from aiinfra.models.flops import training_flops_per_token
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.storage import training_checkpoint_bytes, write_seconds

from .checkpoints import GB, LLAMA3_STORAGE_BANDWIDTH, WRITE_MODELS

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
#: Aggregate storage bandwidths of the cluster table, bytes/s.
CLUSTER_STORAGE = (100e9, LLAMA3_STORAGE_BANDWIDTH)


def _cluster(model: str, bandwidth: float) -> dict[str, float]:
    """The cost model's step (s), sync stall (s) and async stall (ms) of ``model``."""
    size = training_checkpoint_bytes(preset(model)).total
    flops = training_flops_per_token(preset(model), CLUSTER_SEQ) * CLUSTER_BATCH_TOKENS
    gpu = GPUS[CLUSTER_GPU]
    return {
        "step_s": flops / (CLUSTER_GPUS * CLUSTER_MFU * gpu.bf16_flops),
        "sync_s": write_seconds(size, bandwidth),
        "stage_ms": 1e3 * size / CLUSTER_GPUS / PCIE5_X16_BANDWIDTH,
    }


def cluster_table() -> Table:
    """Cost model: a save's stall, sync and async, against a step on 1,024 H100s."""
    rows = []
    for name in WRITE_MODELS[:2]:
        for bw in CLUSTER_STORAGE:
            c = _cluster(name, bw)
            step, sync, stage = c["step_s"], c["sync_s"], c["stage_ms"]
            rows.append(
                [name, f"{bw / GB:,.0f}", f"{step:.1f}", f"{sync:.1f}", f"{stage:.0f}"]
            )
    return Table(
        ["model", "storage (GB/s)", "step (s)", "sync stall (s)", "async stall (ms)"],
        rows,
        note=(
            "A cost model, not a measurement. Step: the step's FLOPs at the stated "
            "MFU. Sync stall: the training checkpoint over the storage bandwidth. "
            "Async stall: each GPU's share of it copied to host memory over PCIe "
            "5.0 x16."
        ),
        stamp=(
            f"{CLUSTER_GPUS:,} {GPUS[CLUSTER_GPU].name}, MFU {CLUSTER_MFU:.0%}, "
            f"{CLUSTER_BATCH_TOKENS / 2**20:.0f}Mi tokens per step in sequences of "
            f"{CLUSTER_SEQ:,}"
        ),
    )


def cluster_value(model: str, what: str) -> float:
    """The cluster model's ``step_s``, ``sync_s`` or ``stage_ms``, slower storage."""
    return _cluster(model, CLUSTER_STORAGE[0])[what]


def cluster_storage_gb_s() -> float:
    """The smaller storage bandwidth of the cluster model, GB/s."""
    return CLUSTER_STORAGE[0] / GB
