"""What ``docs/communication/checkpoints.rst`` shows: its values, tables, figures.

Sizes come from the memory calculator through :mod:`aiinfra.storage.sizes`; the
measured numbers from the stamped file of ``aiinfra bench storage``
(:mod:`aiinfra.storage.bench`); the cluster's is a cost model (:mod:`._cluster`).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from matplotlib.figure import Figure

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.hardware.reliability import LLAMA3_405B
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.storage import (
    inference_checkpoint_bytes,
    optimizer_state_bytes,
    training_checkpoint_bytes,
    write_seconds,
)

from . import _cluster

GB = 1e9
#: Models of the size table, smallest first.
SIZE_MODELS = ("gpt2", "llama-3-8b", "llama-3-70b", "gpt3-175b", "deepseek-v3")
#: "total_size" of model.safetensors.index.json on the Hugging Face Hub, bytes of
#: the bf16 weights as shipped (meta-llama/Meta-Llama-3-8B, meta-llama/Llama-3.1-70B;
#: the same numbers as tests/storage/test_sizes.py).
HUB_INDEX_BYTES = {"llama-3-8b": 16_060_522_496, "llama-3-70b": 141_107_412_992}
#: Sustained throughput of the storage of Llama 3's training cluster, bytes/s
#: (Dubey et al. 2024, Sec. 3.3.1: Tectonic, 2 TB/s sustained, 7 TB/s peak).
LLAMA3_STORAGE_BANDWIDTH = 2e12
WRITE_MODELS = ("llama-3-8b", "llama-3-70b", "deepseek-v3")
RESHARD_TENSOR = "model.0.weight"  # 10 rows: 3, 3, 3, 1 over the 4 saving ranks


def bytes_per_parameter() -> int:
    """Bytes a mixed-precision Adam checkpoint holds per parameter (2 + K)."""
    size = training_checkpoint_bytes(preset("llama-3-8b"))
    return round(size.total / size.n_params)


def adam_k() -> int:
    """K of the memory calculator for mixed-precision Adam, bytes per parameter."""
    return optimizer_state_bytes("adam", "bf16-mixed")


def training_checkpoint_gb(model: str) -> float:
    """Bytes of a model's mixed-precision Adam checkpoint, GB."""
    return training_checkpoint_bytes(preset(model)).total / GB


def checkpoint_size_table() -> Table:
    """Inference and training checkpoint of each model, and the Hub's own count."""
    rows = []
    for name in SIZE_MODELS:
        cfg = preset(name)
        inf, train = inference_checkpoint_bytes(cfg), training_checkpoint_bytes(cfg)
        same = "=" if HUB_INDEX_BYTES.get(name) == inf.total else ""
        n, w, t = inf.n_params / 1e9, inf.total / GB, train.total / GB
        rows.append([name, f"{n:,.1f}", f"{w:,.1f}", same, f"{t:,.0f}"])
    columns = ["model", "parameters (B)", "weights, bf16 (GB)", "= Hub index"]
    return Table(
        [*columns, "training (GB)"],
        rows,
        note=(
            "GB = 1e9 bytes. Training: bf16 weights, fp32 master weights, Adam's "
            "two fp32 moments. '=': the Hub's model.safetensors.index.json "
            "total_size is the same number of bytes."
        ),
    )


def write_time_figure() -> Figure:
    """Seconds to write a training checkpoint against the aggregate bandwidth."""
    bw = np.logspace(9, 13, 50)  # 1 GB/s .. 10 TB/s
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    for name in WRITE_MODELS:
        size = training_checkpoint_bytes(preset(name)).total
        ax.loglog(bw / GB, [write_seconds(size, b) for b in bw], label=name)
    ax.axvline(LLAMA3_STORAGE_BANDWIDTH / GB, color="grey", linestyle="--")
    top = ax.get_xaxis_transform()
    ax.text(LLAMA3_STORAGE_BANDWIDTH / GB, 0.98, " Llama 3", transform=top, va="top")
    ax.set_xlabel("storage bandwidth (GB/s)")
    ax.set_ylabel("write time (s)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend()
    return fig


def write_seconds_at(model: str, bandwidth_gb_s: float) -> float:
    """Seconds to write ``model``'s training checkpoint at ``bandwidth_gb_s`` GB/s."""
    size = training_checkpoint_bytes(preset(model)).total
    return write_seconds(size, bandwidth_gb_s * GB)


def llama3_storage_tb_s() -> float:
    """Llama 3's sustained storage throughput, TB/s."""
    return LLAMA3_STORAGE_BANDWIDTH / 1e12


@cache
def _bench() -> dict:
    return results.load("storage", "gloo")


def reshard_value(key: str) -> float:
    """A number of the measured round trip: ``bytes``, ``files`` or ``tensors``."""
    return _bench()["reshard"][key]


def reshard_max_abs_diff(ranks: int) -> float:
    """Largest ``abs(loaded - saved)`` over all tensors, loading on ``ranks`` ranks."""
    return _bench()["reshard"]["loads"][str(ranks)]["max_abs_diff"]


def _segments(bounds: list[tuple[int, int]], chunks: list[list]) -> list[list]:
    """For each loading rank's rows [a, b): (start, rows, saving file index)."""
    overlap = [
        [
            (max(a, s), min(b, s + n) - max(a, s), f)
            for f, (s, n, _) in enumerate(chunks)
        ]
        for a, b in bounds
    ]
    return [[seg for seg in rank if seg[1] > 0] for rank in overlap]


def reshard_figure() -> Figure:
    """Rows of one weight saved by 4 ranks, and which file each loading rank reads."""
    res = _bench()["reshard"]
    chunks = res["chunks"][RESHARD_TENSOR]
    rows = sum(n for _, n, _ in chunks)
    colors = ["C0", "C1", "C2", "C3"]
    jobs = [("saved on 4 ranks", [[(s, n, f)] for f, (s, n, _) in enumerate(chunks)])]
    for ranks, per_rank in sorted(res["loads"].items(), reverse=True):
        starts = np.cumsum(
            [0, *per_rank["rows"][RESHARD_TENSOR.removeprefix("model.")]]
        )
        bounds = list(zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True))
        jobs.append((f"loaded on {ranks} ranks", _segments(bounds, chunks)))
    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    axes = fig.subplots(1, len(jobs), sharey=True)
    for ax, (title, ranks_) in zip(axes, jobs, strict=True):
        for r, segs in enumerate(ranks_):
            for start, n, f in segs:
                ax.bar(r, n, bottom=start, color=colors[f], edgecolor="k", width=0.7)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(len(ranks_)), [f"rank {r}" for r in range(len(ranks_))])
        ax.tick_params(labelsize=8)
    axes[0].set_ylim(rows, 0)
    axes[0].set_ylabel("row of the weight")
    handles = [
        axes[0].bar(0, 0, color=c, label=chunks[f][2]) for f, c in enumerate(colors)
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize=8)
    return fig


def reshard_table() -> Table:
    """Rows each rank holds after loading, and the largest difference from the save."""
    res, keys = _bench()["reshard"], ("0.weight", "2.weight")
    saved = [str([n for _, n, _ in res["chunks"][f"model.{k}"]]) for k in keys]
    rows = [["4 (save)", *saved, ""]]
    for ranks, load in sorted(res["loads"].items(), reverse=True):
        held = [str(load["rows"][k]) for k in keys]
        rows.append([ranks, *held, f"{load['max_abs_diff']:g}"])
    st = _bench()["stamp"]
    return Table(
        ["ranks", "rows of 0.weight", "rows of 2.weight", "max abs(loaded - saved)"],
        rows,
        note="Measured: the largest difference over every weight and Adam moment.",
        stamp=results.measured_on(st)[0],
        fields=results.measured_on(st)[1],
    )


def timing(mode: str, key: str) -> float:
    """A measured number of the ``none``/``sync``/``async`` loop (``step_ms``, ...)."""
    return _bench()["checkpointing"]["modes"][mode][key]


def timing_config(key: str) -> int:
    """A size of the timed loops: ``width``, ``steps``, ``every``, ``timed_ranks``."""
    return _bench()["config"][key]


def checkpoint_mb() -> float:
    """Bytes of one checkpoint of the timed loops, MB."""
    return _bench()["checkpointing"]["checkpoint_bytes"] / 1e6


def hidden_fraction() -> float:
    """1 - async blocked time / sync blocked time, measured."""
    return _bench()["checkpointing"]["hidden_fraction"]


def checkpointing_figure() -> Figure:
    """Milliseconds per step, training and blocked by saves, per mode (measured)."""
    modes = ("none", "sync", "async")
    blocked = [timing(m, "blocked_ms_per_step") for m in modes]
    train = [timing(m, "step_ms") - b for m, b in zip(modes, blocked, strict=True)]
    fig = Figure(figsize=(5.6, 3.2), layout="constrained")
    ax = fig.subplots()
    ax.bar(modes, train, color="C0", label="training")
    ax.bar(modes, blocked, bottom=train, color="C3", label="blocked by the checkpoint")
    ax.set_ylabel("time per step (ms)")
    ax.legend(loc="upper left", fontsize=8)
    return fig


def kill_table() -> Table:
    """What the disk held after rank 1 was killed halfway through step 2 (measured)."""
    at = _bench()["atomic"]
    partial = ", ".join(at["partial_files"])
    rows = [
        ["the latest pointer names", at["pointer"]],
        ["committed checkpoints", ", ".join(at["committed"])],
        ["step 2's temporary folder holds", partial],
        ["the checkpoint a reader resumes from", at["latest"]],
        ["the restarted job loaded step", str(at["restarted_at_step"])],
    ]
    return Table(
        ["after the kill", "found"],
        rows,
        note="Measured on 2 gloo ranks; the spawn itself failed with the dead rank.",
    )


def llama3_unexpected_per_day() -> float:
    """Unexpected interruptions per day of Llama 3 405B's pre-training."""
    report = LLAMA3_405B
    return report.unexpected / report.days


def training_over_inference() -> float:
    """A mixed-precision Adam checkpoint over the bf16 weights alone (2 + K over 2)."""
    cfg = preset("llama-3-8b")
    return training_checkpoint_bytes(cfg).total / inference_checkpoint_bytes(cfg).total


def reshard_rows() -> int:
    """Rows of the weight that the resharding figure follows."""
    return sum(n for _, n, _ in _bench()["reshard"]["chunks"][RESHARD_TENSOR])


def cpu_count() -> int:
    """Cores of the machine the storage benchmark ran on."""
    return _bench()["stamp"]["cpu_count"]


CLUSTER_GPUS = _cluster.CLUSTER_GPUS  # GPUs of the cluster's cost model
#: Aggregate storage bandwidths of the cluster table, bytes/s.
CLUSTER_STORAGE = (100e9, LLAMA3_STORAGE_BANDWIDTH)


def cluster_table() -> Table:
    """Cost model: a save's stall, sync and async, against a step on 1,024 H100s."""
    rows = []
    for name in WRITE_MODELS[:2]:
        for bw in CLUSTER_STORAGE:
            c = _cluster.save_costs(name, bw)
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
        stamp="{gpus} {gpu}, MFU {mfu}, {tokens}Mi tokens per step in sequences of "
        "{seq}",
        fields={
            "gpus": f"{CLUSTER_GPUS:,}",
            "gpu": GPUS[_cluster.CLUSTER_GPU].name,
            "mfu": f"{_cluster.CLUSTER_MFU:.0%}",
            "tokens": f"{_cluster.CLUSTER_BATCH_TOKENS / 2**20:.0f}",
            "seq": f"{_cluster.CLUSTER_SEQ:,}",
        },
    )


def cluster_value(model: str, what: str) -> float:
    """The cluster model's ``step_s``, ``sync_s`` or ``stage_ms``, slower storage."""
    return _cluster.save_costs(model, CLUSTER_STORAGE[0])[what]


def cluster_storage_gb_s() -> float:
    """The smaller storage bandwidth of the cluster model, GB/s."""
    return CLUSTER_STORAGE[0] / GB
