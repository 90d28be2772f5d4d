"""What ``docs/inference/fp8.rst`` shows: values, tables, figures.

The W8A8 errors are computed at build time on one synthetic layer whose
activations have a few outlier channels (fixed generators, well under a second);
those of a trained model's own layers are read from the stamped result
``quant-eval`` (:func:`aiinfra.infer.quant.evaluate.run_quant_eval`, which
``aiinfra quantize --stamp`` writes: the model is trained for minutes);
the decode-step bytes and the tokens/s bounds are the cost model of
:func:`aiinfra.infer.step_cost.decode_step_bytes` with the HBM bandwidth of the
accelerators' datasheets.
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
from aiinfra.infer.quant.w8a8 import FORMATS, SCALINGS, w8a8_error
from aiinfra.infer.step_cost import decode_step_bytes
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.results import measured_on

FP8_TOKENS, FP8_IN, FP8_OUT = 256, 512, 512  # the demonstration layer
FP8_OUTLIER_CHANNELS = (7, 200, 300)  # input channels scaled up
FP8_OUTLIER = 100.0  # how much larger those channels are, in the table
FP8_OUTLIERS = (1.0, 3.0, 10.0, 30.0, 100.0)  # the figure's magnitudes
FP8_WEIGHT_STD = 0.05  # the demonstration's weights: normal, this deviation
FP8_MODEL = "llama-3-8b"
FP8_CONTEXT = 1024  # cached tokens per sequence in the decode table
FP8_GPU = "H200"
FP8_BATCHES = (1, 4, 16, 64, 256)
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int4": 0.5}  # per weight, scales ignored


def _layer(outlier: float) -> tuple[Tensor, Tensor]:
    """Activations ``(N, in)`` with outlier channels; a weight ``(out, in)``."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(FP8_TOKENS, FP8_IN, generator=g)
    x[:, list(FP8_OUTLIER_CHANNELS)] *= outlier
    w = FP8_WEIGHT_STD * torch.randn(FP8_OUT, FP8_IN, generator=g)
    return x, w


@functools.cache
def _errors(outlier: float) -> dict[tuple[str, str], float]:
    """``{(format, scaling): relative error %}`` of the layer in W8A8."""
    x, w = _layer(outlier)
    return {(f, s): 100 * w8a8_error(x, w, f, s) for f in FORMATS for s in SCALINGS}


def fp8_w8a8_error(fmt: str, scaling: str, outlier: float = FP8_OUTLIER) -> float:
    """Relative error (%) of the demonstration layer's W8A8 matmul."""
    return _errors(outlier)[(fmt, scaling)]


def fp8_outlier() -> float:
    """How much larger the outlier channels are in the table."""
    return FP8_OUTLIER


def fp8_error_table() -> Table:
    """W8A8 error by scale group, fp8 e4m3 against int8, with and without outliers."""
    columns = ["scales", "fp8, no outliers", "int8, no outliers", "fp8", "int8"]
    rows = [
        [s]
        + [f"{fp8_w8a8_error(f, s, 1.0):.2f} %" for f in FORMATS]
        + [f"{fp8_w8a8_error(f, s):.2f} %" for f in FORMATS]
        for s in SCALINGS
    ]
    return Table(
        columns,
        rows,
        note="Relative error of X W^T with both operands rounded; the last two "
        "columns with the outlier channels of the stamp.",
        stamp="X: {n} x {k}, channels {channels} x {outlier}; W: {m} x {k}",
        fields={
            "n": FP8_TOKENS,
            "k": FP8_IN,
            "m": FP8_OUT,
            "channels": ", ".join(map(str, FP8_OUTLIER_CHANNELS)),
            "outlier": f"{FP8_OUTLIER:g}",
        },
    )


def fp8_error_figure() -> Figure:
    """W8A8 error against the outliers' magnitude, per format and scale group."""
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.add_subplot()
    styles = {"fp8": "-", "int8": "--"}
    markers = dict(zip(SCALINGS, ("o", "s", "^"), strict=True))
    for f in FORMATS:
        for s in SCALINGS:
            errs = [fp8_w8a8_error(f, s, o) for o in FP8_OUTLIERS]
            ax.plot(
                FP8_OUTLIERS,
                errs,
                styles[f],
                marker=markers[s],
                ms=4,
                label=f"{f}, {s}",
            )
    ax.set_xscale("log")
    ax.set_xlabel("outlier channels' magnitude (x the others)")
    ax.set_ylabel("relative error of X W^T (%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return fig


@functools.cache
def _model_runs() -> dict[str, dict[str, Any]]:
    """The stamped evaluation's runs by key, and the evaluation itself as ``""``."""
    res = results.load(quant_eval.KIND, "cpu")
    return {"": res} | {r["key"]: r for r in res["rows"]}


def _model_key(fmt: str, tiles: bool) -> str:
    if fmt not in quant_eval.FORMAT_METHODS:
        raise ValueError(f"fmt must be one of {quant_eval.FORMAT_METHODS}, got {fmt!r}")
    if not isinstance(tiles, bool):
        raise TypeError(f"tiles must be a bool, got {tiles!r}")
    return f"{fmt}-w8" + (f"-g{fp8_model_group()}" if tiles else "")


def fp8_model_group() -> int:
    """The tile edge g of the trained model's runs (1 x g inputs, g x g weights)."""
    groups = {
        r["group_size"]
        for k, r in _model_runs().items()
        if k and r["method"] in quant_eval.FORMAT_METHODS
    }
    (group,) = groups - {None}
    return group


def fp8_model_error(fmt: str, tiles: bool = False) -> float:
    """Mean relative output error (%) of the trained model's layers in W8A8.

    ``tiles``: 1 x g tiles and g x g blocks (:func:`fp8_model_group`), else one
    scale per tensor.
    """
    return 100 * _model_runs()[_model_key(fmt, tiles)]["output_err"]


def fp8_model_layer_error(fmt: str, layer: str, tiles: bool = False) -> float:
    """Relative output error (%) of one layer of the trained model in W8A8."""
    errs = {e["layer"]: e for e in _model_runs()[""]["layers"][_model_key(fmt, tiles)]}
    if layer not in errs:
        raise ValueError(f"layer must be one of {sorted(errs)}, got {layer!r}")
    return 100 * errs[layer]["output_err"]


def fp8_model_ppl_change(fmt: str, tiles: bool = False) -> float:
    """Held-out perplexity change (%) of the trained model in W8A8, vs float."""
    runs = _model_runs()
    return 100 * (runs[_model_key(fmt, tiles)]["ppl"] / runs["float-w16"]["ppl"] - 1)


def _model_runs_shown() -> list[tuple[str, bool]]:
    return [(f, tiles) for tiles in (False, True) for f in FORMATS]


def _model_label(fmt: str, tiles: bool) -> str:
    g = fp8_model_group()
    return f"{fmt}, " + (f"1x{g} tiles / {g}x{g} blocks" if tiles else "per tensor")


def fp8_model_table() -> Table:
    """The trained model in W8A8, FP8 and INT8, per tensor and by tiles and blocks."""
    rows = [
        [
            _model_label(f, g),
            round(_model_runs()[_model_key(f, g)]["ppl"], 3),
            round(fp8_model_ppl_change(f, g), 2) + 0.0,  # no "-0"
            round(fp8_model_error(f, g), 2),
        ]
        for f, g in _model_runs_shown()
    ]
    res = _model_runs()[""]
    on, fields = measured_on(res["stamp"])
    c = res["config"]["model"]
    fields |= {"width": c["d_model"], "layers": c["n_layers"]}
    fields["ppl"] = f"{_model_runs()['float-w16']['ppl']:.3f}"
    return Table(
        ["scales", "perplexity", "vs float (%)", "output err (%)"],
        rows,
        note="Held-out perplexity of the trained model with every linear layer in "
        "W8A8, and the relative output error averaged over its layers.",
        stamp=on + "; h = {width}, L = {layers}; float perplexity {ppl}",
        fields=fields,
    )


def fp8_model_figure() -> Figure:
    """Each layer's W8A8 output error in the trained model, FP8 against INT8."""
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.add_subplot()
    layers = _model_runs()[""]["layers"]
    shown = _model_runs_shown()
    names = [e["layer"].removeprefix("blocks.") for e in layers[_model_key(*shown[0])]]
    width = 0.8 / len(shown)
    colors = {"fp8": ("tab:blue", "tab:cyan"), "int8": ("tab:red", "tab:orange")}
    for i, (f, g) in enumerate(shown):
        errs = [100 * e["output_err"] for e in layers[_model_key(f, g)]]
        xs = [j + (i - (len(shown) - 1) / 2) * width for j in range(len(errs))]
        color = colors[f][g]
        ax.bar(xs, errs, width, color=color, label=_model_label(f, g))
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("relative output error (%)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _step_bytes(weights: str, batch: int) -> float:
    return decode_step_bytes(
        preset(FP8_MODEL), batch, FP8_CONTEXT, weight_bytes=WEIGHT_BYTES[weights]
    )


def fp8_tokens_bound(weights: str, batch: int, gpu: str = FP8_GPU) -> float:
    """Tokens/s bound of decoding: ``batch`` tokens per step over bytes / bandwidth."""
    return batch * GPUS[gpu].hbm_bandwidth / _step_bytes(weights, batch)


def fp8_decode_table() -> Table:
    """Bytes per decode step and the tokens/s bound, bf16, fp8 and int4 weights."""
    columns = ["weights", "GB per step, B = 1", "tokens/s bound, B = 1"]
    columns += ["GB per step, B = 64", "tokens/s bound, B = 64"]
    rows = [
        [w]
        + [
            v
            for b in (1, 64)
            for v in (
                f"{_step_bytes(w, b) / 1e9:.2f}",
                f"{fp8_tokens_bound(w, b):,.0f}",
            )
        ]
        for w in WEIGHT_BYTES
    ]
    return Table(
        columns,
        rows,
        note="Cost model: every weight and the bf16 KV cache read once per step, "
        "at the HBM bandwidth of the datasheet; scales not counted.",
        stamp="{model}, T = {context}, {gpu}",
        fields={"model": FP8_MODEL, "context": FP8_CONTEXT, "gpu": FP8_GPU},
    )


def fp8_bound_figure() -> Figure:
    """Tokens/s bound against batch for bf16, fp8 and int4 weights."""
    fig = Figure(figsize=(6.0, 3.2), layout="constrained")
    ax = fig.add_subplot()
    for w, style in zip(WEIGHT_BYTES, ("-o", "-d", "-s"), strict=True):
        tps = [fp8_tokens_bound(w, b) for b in FP8_BATCHES]
        ax.plot(FP8_BATCHES, tps, style, ms=4, label=f"{w} weights")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(FP8_BATCHES, [str(b) for b in FP8_BATCHES])
    ax.set_xlabel("sequences decoded together, B")
    ax.set_ylabel("tokens / s bound (model)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
