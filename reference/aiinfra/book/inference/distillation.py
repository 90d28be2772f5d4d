"""What ``docs/inference/distillation.rst`` shows: its values, tables, figures.

The training runs (a teacher, a student on labels, a student distilled) take tens of
seconds, so they are read from ``docs/_data/distillation.json``, which
``aiinfra distill`` writes (:func:`~aiinfra.infer.distill.train.stamp_distillation`).
The soft targets are the stamped teacher's logits at one frequent context, softened
at build time; the gradient figure is computed from random logits at build time.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.infer.distill.loss import distillation_loss, soft_targets
from aiinfra.infer.distill.train import load_distillation
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table
from aiinfra.results import measured_on

_TEMPERATURES = (1.0, 2.0, 4.0, 8.0)  # the soft-target figure's
_GRAD_V = 32  # V of the gradient figure's random logits
_GRAD_TEMPERATURES = (0.5, 1, 2, 4, 8, 16, 32, 64, 128)
# Sanh et al. 2019, abstract: DistilBERT against BERT-base, percent.
_DISTILBERT = {"smaller": 40, "faster": 60, "retained": 97}
# Zhou et al. 2024 (DistillSpec), abstract: speed-up over standard speculative
# decoding with a distilled draft, percent, over their benchmarks.
_DISTILLSPEC_SPEEDUP = {"low": 10, "high": 45}
# Llama 3.2 1B and 3B, from their Hugging Face config.json (tied embeddings, GQA).
_LLAMA32 = {
    name: TransformerConfig(
        vocab_size=128256,
        d_model=h,
        n_layers=n,
        n_heads=heads,
        n_kv_heads=8,
        d_ff=8192,
        max_seq_len=131072,
        rope_theta=500000.0,
        tie_embeddings=True,
    )
    for name, h, n, heads in (
        ("llama-3.2-1b", 2048, 16, 32),
        ("llama-3.2-3b", 3072, 28, 24),
    )
}
_LABELS = {
    "teacher": "teacher",
    "labels": "student, labels only",
    "distilled": "student, distilled",
}


@functools.cache
def _result() -> dict[str, Any]:
    return load_distillation()


def distill_config(name: str) -> Any:
    """One field of the stamped run's config, e.g. ``temperature``."""
    return _result()["config"][name]


def distill_loss(model: str, which: str = "final") -> float:
    """Held-out loss (nats per token) of ``teacher``, ``labels`` or ``distilled``.

    ``which`` is ``"final"`` (after the last step) or ``"best"`` (the lowest seen).
    """
    return _result()[which][model]


def distill_source_loss() -> float:
    """The chain's own cross-entropy on the held-out tokens: the floor."""
    return _result()["source_loss"]


def distill_perplexity(model: str, which: str = "final") -> float:
    """``exp`` of :func:`distill_loss`."""
    return math.exp(distill_loss(model, which))


def distill_parameters(role: str) -> int:
    """Parameters of the ``teacher`` or the ``student``."""
    return _result()["parameters"][role]


def distill_param_ratio() -> float:
    """How many times larger the teacher is than the student."""
    return distill_parameters("teacher") / distill_parameters("student")


def distill_gap_closed_percent() -> float:
    """Share of the label-only student's gap to the teacher closed by distillation, %.

    The label-only student is taken at its best step (early stopping).
    """
    lab = distill_loss("labels", "best")
    kd, te = distill_loss("distilled"), distill_loss("teacher")
    return 100 * (lab - kd) / (lab - te)


def distill_distilbert_percent(key: str) -> int:
    """DistilBERT's published ``smaller``, ``faster`` or ``retained`` share, %."""
    return _DISTILBERT[key]


def distill_distillspec_percent(key: str) -> int:
    """DistillSpec's published ``low`` or ``high`` speed-up over plain SD, %."""
    return _DISTILLSPEC_SPEEDUP[key]


def _llama(name: str) -> TransformerConfig:
    return _LLAMA32[name] if name in _LLAMA32 else preset(name)


def distill_llama_billions(name: str) -> float:
    """Parameters of ``llama-3.2-1b``, ``llama-3.2-3b`` or a preset, billions."""
    return count_parameters(_llama(name)).total / 1e9


def distill_weight_read_ms(name: str, gpu: str = "H100") -> float:
    """Milliseconds to read a model's bf16 weights once from ``gpu``'s HBM.

    A decoding step at batch 1 reads every matrix once, the embedding table only
    at one row per token unless it is tied to the head: this is the floor of its
    time (the roofline's memory bound), whatever the FLOP/s.
    """
    c = _llama(name)
    read = count_parameters(c).total
    if not c.tie_embeddings:
        read -= c.vocab_size * c.d_model  # only the token's row of the table
    return 2 * read / GPUS[gpu].hbm_bandwidth * 1e3


def _example() -> tuple[torch.Tensor, torch.Tensor]:
    ex = _result()["example"]
    v = torch.tensor(ex["teacher_logits"], dtype=torch.float64)  # (V,)
    return v, torch.tensor(ex["source_probs"], dtype=torch.float64)


def distill_dark_mass(temperature: float) -> float:
    """The example's soft-target probability on tokens the chain never emits, %."""
    v, p = _example()
    return 100 * float(soft_targets(v, temperature)[p == 0].sum())


def distill_branching() -> int:
    """Successors the chain allows after each token."""
    return distill_config("branching")


def distill_soft_targets_figure() -> Figure:
    """The stamped teacher's distribution at one context, at several temperatures."""
    v, p = _example()
    order = torch.argsort(v, descending=True)  # tokens by the teacher's preference
    rank = torch.arange(1, len(v) + 1)
    fig = Figure(figsize=(6, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for i, t in enumerate(_TEMPERATURES):
        q = soft_targets(v, t)[order]
        ax.plot(
            rank,
            q,
            marker="o",
            ms=3,
            lw=1,
            color=f"C{i}",
            label=rf"$\mathcal{{T}} = {t:g}$",
        )
    allowed = p[order] > 0
    ax.scatter(
        rank[allowed],
        p[order][allowed],
        marker="x",
        s=40,
        color="k",
        zorder=3,
        label="true probability",
    )
    ax.set_yscale("log")
    ax.set_xlabel("token, in the teacher's order")
    ax.set_ylabel("probability")
    ax.legend(fontsize=7, ncols=3)
    return fig


def _gradient_norms(scaled: bool) -> list[float]:
    g = torch.Generator().manual_seed(0)
    v = torch.randn(_GRAD_V, generator=g, dtype=torch.float64) * 2
    z0 = torch.randn(_GRAD_V, generator=g, dtype=torch.float64) * 2
    out = []
    for t in _GRAD_TEMPERATURES:
        z = z0.clone().requires_grad_()
        loss = distillation_loss(z[None], v[None], temperature=float(t), alpha=1.0)
        (loss if scaled else loss / t**2).backward()
        out.append(float(z.grad.norm()))
    return out


def distill_gradient_limit() -> float:
    """``|z - v| / V`` after centring: the large-temperature limit of the gradient."""
    g = torch.Generator().manual_seed(0)
    v = torch.randn(_GRAD_V, generator=g, dtype=torch.float64) * 2
    z = torch.randn(_GRAD_V, generator=g, dtype=torch.float64) * 2
    d = (z - z.mean()) - (v - v.mean())
    return float(d.norm() / _GRAD_V)


def distill_gradient_figure() -> Figure:
    """Gradient size against temperature, with and without the ``T^2`` factor."""
    ts = _GRAD_TEMPERATURES
    fig = Figure(figsize=(6, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(ts, _gradient_norms(True), marker="o", ms=3, label=r"with $\mathcal{T}^2$")
    ax.plot(
        ts, _gradient_norms(False), marker="s", ms=3, label=r"without $\mathcal{T}^2$"
    )
    ax.axhline(
        distill_gradient_limit(), color="k", ls="--", lw=1, label=r"$|z - v| / V$"
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(r"temperature $\mathcal{T}$")
    ax.set_ylabel("gradient norm")
    ax.legend(fontsize=7)
    return fig


def distill_curves_figure() -> Figure:
    """Held-out loss of the three runs against the training step (stamped)."""
    r = _result()
    every = r["config"]["eval_every"]
    fig = Figure(figsize=(6, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for i, (key, label) in enumerate(_LABELS.items()):
        ys = r["curves"][key]
        ax.plot(
            [every * k for k in range(len(ys))],
            ys,
            marker="o",
            ms=3,
            color=f"C{i}",
            label=label,
        )
    ax.axhline(r["source_loss"], color="k", ls="--", lw=1, label="the source itself")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out loss (nats/token)")
    ax.legend(fontsize=7)
    return fig


def distill_table() -> Table:
    """Parameters, data and held-out loss of the three runs."""
    r, c = _result(), _result()["config"]
    rows = []
    for key, label in _LABELS.items():
        role = "teacher" if key == "teacher" else "student"
        seqs = c["teacher_seqs"] if key == "teacher" else c["transfer_seqs"]
        rows.append(
            [
                label,
                distill_parameters(role),
                seqs,
                round(distill_loss(key), 3),
                round(distill_loss(key, "best"), 3),
                round(distill_perplexity(key), 2),
            ]
        )
    note = (
        "Held-out cross-entropy in nats per token after the last step and the "
        "lowest seen; perplexity is exp of the final loss."
    )
    on, fields = measured_on(r["stamp"])
    stamp = (
        "V = {vocab}, T = {seq}, temperature {temperature}, alpha {alpha}; source "
        "loss {loss}; measured on " + on
    )
    fields |= {
        "vocab": c["vocab"],
        "seq": c["seq_len"],
        "temperature": c["temperature"],
        "alpha": c["alpha"],
        "loss": f"{r['source_loss']:.3f}",
    }
    columns = [
        "model",
        "parameters",
        "training sequences",
        "final loss",
        "best loss",
        "perplexity",
    ]
    return Table(columns, rows, note, stamp, fields=fields)
