"""Figures of the memory section, computed when the book is built.

Each function returns a matplotlib ``Figure`` (built without pyplot) for the
``aiinfra-figure`` directive (through :mod:`aiinfra.book.training`): memory against
sequence length from :mod:`aiinfra.memory.calculator`, and the measured peak of
checkpointed segments from :mod:`aiinfra.memory.experiments`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.memory.activations import output_layer_bytes
from aiinfra.memory.calculator import GB, GiB, estimate_memory
from aiinfra.memory.experiments import (
    gelu_chain,
    measure_segments,
)
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.memory.segments import checkpointed_peak_bytes, sqrt_rule
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset


def memory_vs_seq_figure(model: str = "llama-3-8b", tp: int = 1) -> Figure:
    """Model states and activations per GPU against sequence length.

    Args:
        model: a preset name.
        tp: tensor-parallel ranks (with sequence parallelism when > 1).

    Returns:
        A log-log figure in GiB: model states, activations under each recompute
        mode with the paper's attention, with a fused attention kernel, and the
        output layer's fp32 logits.
    """
    c = preset(model)
    seqs = [2**k for k in range(10, 16)]
    fig = Figure(figsize=(6.4, 4))
    ax = fig.add_subplot()
    est = estimate_memory(c, seq=seqs[0], tp=tp)
    states = est.params + est.grads + est.optimizer
    ax.plot(seqs, [states / GiB] * len(seqs), "k--", label="model states (16 Psi)")
    for rc in ("none", "selective", "full"):
        act = [
            estimate_memory(c, seq=s, tp=tp, sp=tp > 1, recompute=rc).activations
            for s in seqs
        ]
        ax.plot(seqs, [x / GiB for x in act], "o-", label=f"activations, {rc}")
    flash = [
        estimate_memory(c, seq=s, tp=tp, sp=tp > 1, attention="flash").activations
        for s in seqs
    ]
    ax.plot(seqs, [x / GiB for x in flash], "s-", label="activations, fused attention")
    logits = [output_layer_bytes(s, 1, c.d_model, c.vocab_size, tp) for s in seqs]
    ax.plot(seqs, [x / GiB for x in logits], "^:", label="logits + cross-entropy")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length s (micro-batch 1)")
    ax.set_ylabel("GiB per GPU")
    ax.set_title(f"{model}: cost model (Korthikanti et al.)")
    ax.legend()
    fig.tight_layout()
    return fig


def segments_figure(n_layers: int = 16, width: int = 16, b: int = 4) -> Figure:
    """Peak saved bytes of a checkpointed chain against the number of segments.

    Args:
        n_layers: L, Linear + GELU layers in the chain.
        width: features per layer.
        b: batch rows.

    Returns:
        Measured peaks (dots), the exact model (line) and sqrt(L a_layer / a_in)
        (dashed).
    """
    layers = gelu_chain(n_layers, width)
    c = 4 * b * width  # a_in: an fp32 layer input
    ks = list(range(1, n_layers + 1))
    measured = [measure_segments(layers, k, b).peak_bytes for k in ks]
    model = [checkpointed_peak_bytes(n_layers, k, 2 * c, c) for k in ks]
    fig = Figure(figsize=(6.4, 4))
    ax = fig.add_subplot()
    exact = "model: max over $j$ of $j a_{in} + L_j a_{layer} - a_{in}$"
    ax.plot(ks, [m / c for m in model], "-", label=exact)
    ax.plot(ks, [m / c for m in measured], "o", label="measured (saved-tensor hooks)")
    rule = "$\\sqrt{L a_{layer} / a_{in}}$"
    ax.axvline(sqrt_rule(n_layers, 2 * c, c), ls="--", c="gray", label=rule)
    ax.set_xlabel("segments $c$")
    ax.set_ylabel("peak saved bytes / $a_{in}$ (one layer input)")
    ax.set_title(f"{n_layers} layers, $a_{{layer}} = 2 a_{{in}}$")
    ax.legend()
    fig.tight_layout()
    return fig


def zero_memory_vs_ranks_figure(
    model: str = "llama-3-8b", gpu_gb: float = 80
) -> Figure:
    """Model states per GPU against the data-parallel ranks, per ZeRO stage.

    Args:
        model: a preset name.
        gpu_gb: the GPU's memory, GB (10^9 bytes), drawn as a line.

    Returns:
        A log-log figure in GB: stages 0 (DDP) to 3 at 16 Psi, and the GPU's memory.
    """
    psi = count_parameters(preset(model)).total
    ranks = [2**k for k in range(10)]
    fig = Figure(figsize=(6.4, 4))
    ax = fig.add_subplot()
    for stage, style in zip(range(4), ("k--", "o-", "s-", "^-"), strict=True):
        per_rank = [zero_model_states_bytes(psi, stage, n).total / GB for n in ranks]
        ax.plot(ranks, per_rank, style, label="DDP" if stage == 0 else f"ZeRO-{stage}")
    ax.axhline(gpu_gb, color="red", ls=":", label=f"{gpu_gb:g} GB GPU")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("data-parallel ranks N_d")
    ax.set_ylabel("model states per GPU (GB)")
    ax.set_title(f"{model}: 16 Psi, cost model (Rajbhandari et al.)")
    ax.legend()
    fig.tight_layout()
    return fig
