"""What ``docs/inference/quantization_calibrated.rst`` shows: values, tables, figures.

SmoothQuant's and AWQ's figures are computed at build time on one synthetic layer
whose activations have outlier channels (fixed generators, a few milliseconds).
The perplexities and per-layer errors of the trained model are read from the stamped
result ``quant-eval``, which ``aiinfra quantize --stamp`` writes
(:func:`~aiinfra.infer.quant.evaluate.run_quant_eval`; training takes minutes).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from matplotlib.figure import Figure
from torch import Tensor

from aiinfra import results
from aiinfra.accelerators import GPUS
from aiinfra.infer.quant import evaluate as quant_eval
from aiinfra.infer.quant.awq import AWQResult, awq_search
from aiinfra.infer.quant.gptq import PERCDAMP
from aiinfra.infer.quant.smoothquant import W8A8Linear, smooth, smoothing_scales
from aiinfra.report import Table
from aiinfra.results import measured_on

QC_ALPHA = 0.5  # SmoothQuant's migration strength for most models
QC_AWQ_GRID = 20  # AWQ's grid of exponents
QC_TOKENS, QC_IN, QC_OUT = 256, 64, 64  # the demonstration layer
QC_OUTLIERS = {5: 60.0, 23: 30.0, 41: 15.0}  # channel -> how much larger
QC_WEIGHT_STD = 0.05  # the demonstration's weights: normal, this standard deviation
QC_GROUP = 32  # AWQ's group in the demonstration (the papers use 128)
# Frantar et al. 2023, Table 3 (FACTS.md): OPT-125M, WikiText2 perplexity.
QC_PUBLISHED_PPL = {"fp16": 27.65, "rtn": 37.28, "gptq": 31.12}


def qc_published_ppl(run: str) -> float:
    """GPTQ's Table 3, OPT-125M WikiText2 perplexity: ``fp16``, ``rtn`` or ``gptq``."""
    return QC_PUBLISHED_PPL[run]


QC_GPTQ_175B_GPU_HOURS = 4  # Frantar et al. 2023, abstract: OPT-175B, one GPU
QC_AWQ_GROUP = 128  # the group size of AWQ and GPTQ checkpoints
QC_DAMP_PERCENT = 100 * PERCDAMP  # GPTQ's damping, % of the mean diagonal of H


def qc_int8_over_bf16() -> float:
    """H100's dense 8-bit tensor-core peak over its BF16 one (INT8 = FP8 there)."""
    h100 = GPUS["H100"]
    return h100.fp8_flops / h100.bf16_flops


@functools.cache
def _demo() -> tuple[Tensor, Tensor]:
    """Activations ``(N, in)`` with three outlier channels; a weight ``(out, in)``."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(QC_TOKENS, QC_IN, generator=g)
    for j, scale in QC_OUTLIERS.items():
        x[:, j] *= scale
    w = QC_WEIGHT_STD * torch.randn(QC_OUT, QC_IN, generator=g)
    return x, w


def qc_outlier_scale(rank: int) -> float:
    """The ``rank``-th largest outlier factor of the demonstration (0: the largest)."""
    return sorted(QC_OUTLIERS.values(), reverse=True)[rank]


def qc_w8a8_error(smoothed: bool) -> float:
    """Relative error of the demonstration layer in W8A8 (per-tensor activations), %."""
    x, w = _demo()
    lin = torch.nn.Linear(QC_IN, QC_OUT, bias=False)
    with torch.no_grad():
        lin.weight.copy_(w)
    s = smoothing_scales(x.abs().amax(0), w, QC_ALPHA) if smoothed else None
    with torch.no_grad():
        y, y_hat = lin(x), W8A8Linear(lin, s, "tensor")(x)
    return 100 * float((y_hat - y).norm() / y.norm())


def qc_activation_range(smoothed: bool) -> float:
    """Largest over median channel maximum of the activations, before or after."""
    x, w = _demo()
    if smoothed:
        x, _ = smooth(x, w, smoothing_scales(x.abs().amax(0), w, QC_ALPHA))
    m = x.abs().amax(0)
    return float(m.max() / m.median())


def qc_smoothing_figure() -> Figure:
    """Per-channel ``max|X_j|`` and ``max|W_j|`` before and after smoothing."""
    x, w = _demo()
    s = smoothing_scales(x.abs().amax(0), w, QC_ALPHA)
    x_s, w_s = smooth(x, w, s)
    fig = Figure(figsize=(6.4, 2.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (xx, ww), title in zip(
        axes,
        ((x, w), (x_s, w_s)),
        ("before", f"after, alpha = {QC_ALPHA}"),
        strict=True,
    ):
        ch = range(QC_IN)
        ax.bar(ch, xx.abs().amax(0), color="tab:red", alpha=0.7, label="max |X_j|")
        ax.plot(ch, ww.abs().amax(0), "o", ms=2.5, color="tab:blue", label="max |W_j|")
        ax.set_yscale("log")
        ax.set_xlabel("input channel j")
        ax.set_title(title, fontsize=9)
    axes[0].set_ylabel("channel maximum")
    axes[0].legend(fontsize=7)
    return fig


@functools.cache
def _awq() -> AWQResult:
    x, w = _demo()
    return awq_search(x, w, 4, "zeropoint", QC_GROUP, QC_AWQ_GRID)


def qc_awq_alpha() -> float:
    """The exponent AWQ's search picks on the demonstration layer."""
    return _awq().alpha


def qc_awq_gain() -> float:
    """RTN's calibration error over AWQ's on the demonstration layer."""
    r = _awq()
    return r.losses[0] / min(r.losses)


def qc_awq_figure() -> Figure:
    """AWQ's calibration error against the exponent ``alpha`` of ``s = s_X^alpha``."""
    r = _awq()
    rtn = r.losses[0]
    fig = Figure(figsize=(5.0, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(r.alphas, [v / rtn for v in r.losses], "o-", ms=3)
    ax.axhline(1.0, color="grey", ls="--", lw=1)
    ax.annotate("RTN", (0.0, 1.0), xytext=(0.04, 0.93), fontsize=8)
    ax.plot([r.alpha], [min(r.losses) / rtn], "*", ms=12, color="tab:red")
    ax.set_xlabel("alpha")
    ax.set_ylabel("output error / RTN's")
    return fig


@functools.cache
def _eval() -> dict[str, Any]:
    """The stamped evaluation, without the FP8 page's runs (one format by tiles)."""
    res = dict(results.load(quant_eval.KIND, "cpu"))
    res["rows"] = [
        r for r in res["rows"] if r["method"] not in quant_eval.FORMAT_METHODS
    ]
    return res


def _row(key: str) -> dict[str, Any]:
    rows = {r["key"]: r for r in _eval()["rows"]}
    if key not in rows:
        raise ValueError(f"key must be one of {sorted(rows)}, got {key!r}")
    return rows[key]


def _qc_ppl(key: str) -> float:
    """Held-out perplexity of one run, e.g. ``"gptq-w4"`` or ``"float-w16"``."""
    return _row(key)["ppl"]


def qc_output_error(key: str) -> float:
    """Mean relative output error of one run's layers, percent."""
    return 100 * _row(key)["output_err"]


def qc_ppl_increase(key: str) -> float:
    """Perplexity increase of one run over the float model, percent."""
    return 100 * (_qc_ppl(key) / _qc_ppl("float-w16") - 1)


def qc_int8_max_ppl_change() -> float:
    """The largest perplexity change of an int8 run from the float model, percent."""
    int8 = [r["key"] for r in _eval()["rows"] if r["bits"] == 8]
    return max(abs(qc_ppl_increase(key)) for key in int8)


def qc_eval_group() -> int:
    """The group size of the stamped evaluation's group-wise runs.

    Raises:
        ValueError: the runs have no group size, or several.
    """
    groups = {r["group_size"] for r in _eval()["rows"]} - {None}
    if len(groups) != 1:
        raise ValueError(f"the stamped runs must share one group size, got {groups}")
    return groups.pop()


def qc_config(name: str) -> Any:
    """One setting of the stamped run, e.g. ``steps``; model fields by name."""
    cfg = _eval()["config"]
    return cfg["model"][name] if name in cfg["model"] else cfg[name]


_LABELS = {
    "float": "float",
    "rtn": "RTN",
    "awq": "AWQ",
    "gptq": "GPTQ",
    "w8a8": "W8A8",
    "smoothquant": "SmoothQuant",
}


_NO_GRID = {"float": "float32", "w8a8": "W8A8", "smoothquant": "SmoothQuant W8A8"}


def _label(row: dict[str, Any]) -> str:
    method = row["method"]
    if method in _NO_GRID:
        return _NO_GRID[method]
    group = "row" if row["group_size"] is None else f"g{row['group_size']}"
    return f"{_LABELS[method]} int{row['bits']} {group}"


def qc_eval_table() -> Table:
    """Perplexity and mean errors of every run of the stamped evaluation."""
    res = _eval()
    rows = [
        [
            _label(r),
            round(r["ppl"], 3),
            round(qc_ppl_increase(r["key"]), 2) + 0.0,  # no "-0"
            round(100 * r["weight_err"], 2),
            round(100 * r["output_err"], 2),
        ]
        for r in res["rows"]
    ]
    note = (
        "Held-out perplexity; relative weight and output errors averaged over "
        "the quantized layers; row: one scale per output row, g{group}: one per "
        "{group} inputs."
    )
    st, c = res["stamp"], res["config"]
    on, fields = measured_on(st)
    stamp = on + "; V = {vocab}, h = {width}, L = {layers}, {steps} steps; "
    stamp += "floor {floor}"
    fields |= {
        "group": qc_eval_group(),
        "vocab": c["model"]["vocab_size"],
        "width": c["model"]["d_model"],
        "layers": c["model"]["n_layers"],
        "steps": c["steps"],
        "floor": f"{res['floor_ppl']:.3f}",
    }
    columns = [
        "method",
        "perplexity",
        "vs float (%)",
        "weight err (%)",
        "output err (%)",
    ]
    return Table(columns, rows, note, stamp, fields=fields)


def qc_ppl_figure() -> Figure:
    """Held-out perplexity per run, with the float model and the language's floor."""
    res = _eval()
    rows = res["rows"]
    fig = Figure(figsize=(6.0, 3.2), layout="constrained")
    ax = fig.add_subplot()
    colors = {"float": "grey", "rtn": "tab:red", "awq": "tab:green"}
    colors |= {"gptq": "tab:blue", "w8a8": "tab:orange", "smoothquant": "tab:purple"}
    ys = range(len(rows))
    ax.barh(ys, [r["ppl"] for r in rows], color=[colors[r["method"]] for r in rows])
    ax.set_yticks(list(ys), [_label(r) for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.axvline(_qc_ppl("float-w16"), color="black", lw=0.8)
    ax.axvline(res["floor_ppl"], color="black", ls=":", lw=1, label="floor")
    lo = min(res["floor_ppl"], *(r["ppl"] for r in rows))
    ax.set_xlim(0.98 * lo, 1.01 * max(r["ppl"] for r in rows))
    ax.set_xlabel("held-out perplexity")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def qc_layer_figure(group: str = "") -> Figure:
    """Relative output error of every layer under int4 RTN, AWQ and GPTQ."""
    layers = _eval()["layers"]
    keys = [f"{m}-w4{group}" for m in ("rtn", "awq", "gptq")]
    names = [
        e["layer"].replace("blocks.", "").replace("attn.", "").replace("mlp.", "")
        for e in layers[keys[0]]
    ]
    fig = Figure(figsize=(6.4, 2.6), layout="constrained")
    ax = fig.add_subplot()
    width = 0.27
    for i, (key, color) in enumerate(
        zip(keys, ("tab:red", "tab:green", "tab:blue"), strict=True)
    ):
        errs = [100 * e["output_err"] for e in layers[key]]
        xs = [k + (i - 1) * width for k in range(len(names))]
        ax.bar(xs, errs, width, color=color, label=_LABELS[key.split("-")[0]])
    ax.set_xticks(range(len(names)), names, rotation=60, fontsize=7)
    ax.set_ylabel("output error (%)")
    ax.legend(fontsize=7)
    return fig
