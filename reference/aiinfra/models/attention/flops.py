"""Attention FLOPs: the full square, the causal half, a sliding window, and backward.

PaLM's ``12 L H d T`` (Chowdhery et al. 2022, App. B) counts every query against every
key of the sequence, ``T^2`` pairs, and so do the MFU formulas built on it (PaLM's ``6
Psi + 12 L H d T``; Megatron's ``96 B T L h^2 (1 + T / 6h + ...)``, Narayanan et al.
2021, Sec. 5.1, who write ``s`` and ``l`` for ``T`` and ``L``). A causal kernel skips
the keys after each query and computes ``T (T + 1) / 2`` pairs, about half;
FlashAttention-2's benchmarks (Dao 2023, Sec. 4.1) divide the FLOPs by 2 for a causal
mask. With Mistral's sliding window (Jiang et al. 2023) a query sees at most ``W`` keys,
so a sequence has about ``T W`` pairs instead of ``T^2 / 2`` once ``T > W``. The module
counts the pairs of each convention; :mod:`aiinfra.models.flash.kernel_matmuls` counts
the other factor of the FLOPs a kernel executes, its matrix products per pair.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiinfra.models.config import TransformerConfig
from aiinfra.models.flops import DENSE_MODELS, matmul_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); counting does not
    from matplotlib.figure import Figure

CONVENTIONS = ("full", "causal", "window")
"""``full``: all ``T^2`` pairs (PaLM, MFU); ``causal``: ``T (T + 1) / 2``;
``window``: causal within the model's sliding window (equal to causal without one)."""


def attended_pairs(seq_len: int, convention: str = "full", window: int = 0) -> int:
    """Query-key pairs whose score a kernel computes in one sequence of ``T`` tokens.

    Args:
        seq_len: ``T``, a positive integer.
        convention: one of :data:`CONVENTIONS`.
        window: ``W``, keys a query sees, itself included (``window`` only; 0 for
            no window).

    Returns:
        ``T^2`` (full), ``T (T + 1) / 2`` (causal), or
        ``sum_{i=1}^{T} min(i, W)`` (window), which is
        ``W (W + 1) / 2 + (T - W) W`` for ``T > W``.

    Raises:
        ValueError: ``seq_len`` not a positive integer, ``window`` negative, or an
            unknown ``convention``.
    """
    _check_int("seq_len", seq_len, 1)
    _check_int("window", window, 0)
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    T = seq_len
    if convention == "full":
        return T * T
    W = window if convention == "window" and window else T
    if T <= W:
        return T * (T + 1) // 2
    return W * (W + 1) // 2 + (T - W) * W  # the first W rows ramp up, then W each


def attention_training_flops(
    c: TransformerConfig, seq_len: int, convention: str = "full"
) -> float:
    """Attention FLOPs of one training step per token, ``6 L H (d_qk + d_v) P / T``.

    ``P`` is :func:`attended_pairs`; with ``P = T^2`` this is PaLM's
    ``12 L H d T`` (:func:`aiinfra.models.flops.attention_flops_per_token`).

    Args:
        c: the model; ``window`` uses ``c.sliding_window``.
        seq_len: ``T``.
        convention: one of :data:`CONVENTIONS`.

    Returns:
        FLOPs per token (forward ``2`` and backward ``4`` per pair and width).

    Raises:
        ValueError: as :func:`attended_pairs`.
    """
    pairs = attended_pairs(seq_len, convention, c.sliding_window)
    d_qk = c.head_dim + (c.rope_head_dim if c.is_mla else 0)
    return 6 * c.n_layers * c.n_heads * (d_qk + c.head_dim) * pairs / seq_len


def executed_convention(c: TransformerConfig) -> str:
    """What a kernel computes: ``window`` if ``c`` has a sliding window, else causal."""
    return "window" if c.sliding_window else "causal"


def conventions_table(
    seq_len: int = 8192, names: tuple[str, ...] = DENSE_MODELS
) -> Table:
    """Attention per token counted as MFU counts it (full) and as kernels compute it.

    Args:
        seq_len: ``T``.
        names: keys of :data:`~aiinfra.models.presets.PRESETS`.

    Returns:
        One row per model: ``6 Psi``, the attention term counted over the full square
        and over the pairs a causal (or sliding-window) kernel computes, in GFLOP
        per token, and the attention share of training FLOPs under each.
    """
    rows = []
    for name in names:
        c = preset(name)
        six_n = 6 * matmul_parameters(c)
        full = attention_training_flops(c, seq_len, "full")
        kind = executed_convention(c)
        done = attention_training_flops(c, seq_len, kind)
        rows.append(
            [
                name,
                round(six_n / 1e9, 1),
                round(full / 1e9, 1),
                kind,
                round(done / 1e9, 1),
                f"{full / (six_n + full):.1%}",
                f"{done / (six_n + done):.1%}",
            ]
        )
    note = (
        "GFLOP = 1e9 FLOPs per token of one training step. Full: all T^2 query-key "
        "pairs, PaLM's 12 L H d T, which MFU counts. Executed: the pairs a causal "
        "kernel computes, T (T + 1) / 2, or with a sliding window W, "
        "W (W + 1) / 2 + (T - W) W."
    )
    windowed = [n for n in names if preset(n).sliding_window]
    return Table(
        [
            "model",
            "6 Psi (GFLOP)",
            "attention, full (GFLOP)",
            "kernel",
            "attention, executed (GFLOP)",
            "share, full",
            "share, executed",
        ],
        rows,
        note,
        # Model names and numbers only: shown as they are, never a message.
        "; ".join(
            ["T = {T}"] + [f"W = {{w{i}}} ({{m{i}}})" for i, _ in enumerate(windowed)]
        ),
        fields={
            "T": seq_len,
            **{f"w{i}": preset(n).sliding_window for i, n in enumerate(windowed)},
            **{f"m{i}": n for i, n in enumerate(windowed)},
        },
    )


SHARE_CURVES = (
    ("llama-3-8b", "full"),
    ("llama-3-8b", "causal"),
    ("mistral-7b", "window"),
)


def share_figure(max_log2: int = 17, curves: tuple = SHARE_CURVES) -> Figure:
    """Attention share of training FLOPs against ``T``, per counting convention."""
    from matplotlib.figure import Figure

    lengths = [2**k for k in range(10, max_log2 + 1)]
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    for (name, convention), style in zip(curves, ("-o", "--s", ":^"), strict=False):
        c = preset(name)
        six_n = 6 * matmul_parameters(c)
        shares = [
            100 * a / (six_n + a)
            for a in (attention_training_flops(c, t, convention) for t in lengths)
        ]
        label = f"{name}, {convention}"
        if convention == "window":
            label += f" (W = {c.sliding_window})"
        ax.plot(lengths, shares, style, label=label, markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("attention share of training FLOPs (%)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
