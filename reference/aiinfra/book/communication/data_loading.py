"""What ``docs/communication/data_loading.rst`` shows: its values, tables, figures.

The token windows are drawn from :class:`aiinfra.storage.data.TokenWindows` on a
small file; the loader and step rates come from the stamped file of ``aiinfra bench
storage`` (measured on this book's CPU); the cluster's rates are a cost model: a
step's FLOPs (:func:`aiinfra.models.flops.training_flops_per_token`) at an assumed
MFU on a GPU of :data:`aiinfra.accelerators.GPUS`.
"""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.models.flops import training_flops_per_token
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.storage import TokenWindows, token_dtype, write_token_file

from ._cluster import (
    CLUSTER_GPU,
    CLUSTER_MFU,
    CLUSTER_SEQ,
)

#: Tokenizers of the dtype table: the model whose vocabulary each one has.
TOKENIZER_MODELS = ("gpt2", "llama-3-8b", "deepseek-v3")
NEED_MODELS = ("llama-3-8b", "llama-3-70b")
GPUS_PER_NODE = 8
WINDOW_TOKENS, WINDOW_T = 20, 6  # the figure's file: 20 tokens, windows of T = 6


def dtype_table() -> Table:
    """Token dtype and bytes per token for three vocabularies."""
    rows = []
    for name in TOKENIZER_MODELS:
        v = preset(name).vocab_size
        d = token_dtype(v)
        rows.append([name, f"{v:,}", d.name, d.itemsize])
    return Table(
        ["vocabulary of", "V", "dtype", "bytes per token"],
        rows,
        note="uint16 holds ids up to 65,535; larger vocabularies need uint32.",
    )


def windows_figure() -> Figure:
    """A token file cut into windows: inputs x and targets y, shifted by one."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.bin"
        dtype = write_token_file(path, np.arange(WINDOW_TOKENS), WINDOW_TOKENS)
        ds = TokenWindows(path, WINDOW_T, dtype)
        windows = [ds[i] for i in range(len(ds))]
    fig = Figure(figsize=(7.2, 2.0), layout="constrained")
    ax = fig.subplots()
    for t in range(WINDOW_TOKENS):
        ax.add_patch(_cell(t, 2, "white"))
        ax.text(t + 0.5, 2.5, str(t), ha="center", va="center", fontsize=8)
    for i, (x, y) in enumerate(windows):
        for t in x.tolist():
            ax.add_patch(_cell(t, 1, f"C{i}", 0.35))
        for t in y.tolist():
            ax.add_patch(_cell(t, 0, f"C{i}", 0.7))
    ax.set_xlim(0, WINDOW_TOKENS)
    ax.set_ylim(0, 3)
    ax.set_yticks([0.5, 1.5, 2.5], ["targets y", "inputs x", "token file"])
    ax.set_xticks([])
    ax.set_xlabel("token position")
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    return fig


def _cell(t: int, row: int, color: str, alpha: float = 1.0) -> Rectangle:
    return Rectangle((t, row), 1, 1, facecolor=color, alpha=alpha, edgecolor="k")


def window_count() -> int:
    """Windows of the figure's file."""
    return (WINDOW_TOKENS - 1) // WINDOW_T


@cache
def _bench() -> dict:
    return results.load("storage", "gloo")


def loader_tokens_per_s(workers: int) -> float:
    """Measured tokens/s of the ``DataLoader`` with ``workers`` worker processes."""
    rows = _bench()["loader"]["rows"]
    return next(r["loader_tokens_per_s"] for r in rows if r["num_workers"] == workers)


def cpu_needed_tokens_per_s() -> float:
    """Tokens/s that the small Transformer's training step consumes on this CPU."""
    return _bench()["loader"]["rows"][0]["needed_tokens_per_s"]


def loader_config(key: str) -> int:
    """A size of the measured run: ``seq_len``, ``loader_batch``, ``vocab_size``, ..."""
    return _bench()["config"][key]


def step_seconds() -> float:
    """Measured seconds of one training step of the small Transformer."""
    return _bench()["loader"]["step_seconds"]


def loader_margin() -> float:
    """Measured loader tokens/s (no workers) over what the CPU step consumes."""
    return loader_tokens_per_s(0) / cpu_needed_tokens_per_s()


def workers_slowdown() -> float:
    """Measured tokens/s with no workers over tokens/s with 2 workers."""
    return loader_tokens_per_s(0) / loader_tokens_per_s(2)


def gpu_tokens_per_s(model: str) -> float:
    """Cost model: tokens/s one GPU trains at the assumed MFU."""
    flops = training_flops_per_token(preset(model), CLUSTER_SEQ)
    return CLUSTER_MFU * GPUS[CLUSTER_GPU].bf16_flops / flops


def gpus_fed_per_core(model: str) -> float:
    """Measured loader tokens/s on one core over one GPU's modelled need."""
    return loader_tokens_per_s(0) / gpu_tokens_per_s(model)


def need_table() -> Table:
    """Tokens/s and bytes/s that GPUs consume (model) against the loader (measured)."""
    rows = []
    for name in NEED_MODELS:
        need = gpu_tokens_per_s(name)
        itemsize = token_dtype(preset(name).vocab_size).itemsize
        rows.append(
            [
                name,
                f"{need:,.0f}",
                f"{need * itemsize / 1e3:,.0f}",
                f"{need * GPUS_PER_NODE:,.0f}",
                f"{gpus_fed_per_core(name):,.0f}",
            ]
        )
    st = _bench()["stamp"]
    return Table(
        ["model", "tokens/s per GPU", "kB/s per GPU", "tokens/s per node", "GPUs fed"],
        rows,
        note=(
            "Tokens/s per GPU: a cost model, the step's FLOPs per token at the "
            "stated MFU. GPUs fed: the loader's measured tokens/s with no workers "
            "on this CPU over one GPU's need."
        ),
        stamp=(
            "{gpu}, MFU {mfu}, sequences of {seq}, {per_node} GPUs per node; loader "
            "measured on " + results.MEASURED_ON
        ),
        fields={
            "gpu": GPUS[CLUSTER_GPU].name,
            "mfu": f"{CLUSTER_MFU:.0%}",
            "seq": f"{CLUSTER_SEQ:,}",
            "per_node": GPUS_PER_NODE,
            **results.measured_on(st)[1],
        },
    )


def loader_figure() -> Figure:
    """Tokens/s of the loader (measured, bars) against what training consumes."""
    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    bars = {"in the main process": loader_tokens_per_s(0)}
    bars["two workers"] = loader_tokens_per_s(2)
    ax.barh(list(bars), list(bars.values()), color="C0")
    lines = [
        (cpu_needed_tokens_per_s(), "C3", "a step on this CPU (measured)"),
        (gpu_tokens_per_s("llama-3-8b"), "C2", "Llama 3 8B, one GPU (model)"),
        (gpu_tokens_per_s("llama-3-70b"), "C1", "Llama 3 70B, one GPU (model)"),
    ]
    for rate, color, label in lines:
        ax.axvline(rate, color=color, linestyle="--", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("tokens per second")
    fig.legend(loc="outside lower center", ncol=2, fontsize=8)
    return fig
