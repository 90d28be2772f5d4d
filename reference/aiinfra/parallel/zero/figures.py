"""ZeRO's stages pictured: each rank's bytes per parameter, part by part.

The bars are the bytes per parameter of
:func:`~aiinfra.memory.model_states.zero_model_states_bytes` (Rajbhandari et al.
2020, Fig. 1): DDP, then ZeRO-1, -2 and -3, one frame per stage for a lecture and
a 2 x 2 grid for the book. Notation: N_d ranks, K optimizer bytes per parameter.
Every text is either words or numbers, so the book can translate words.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from aiinfra import checks
from aiinfra.memory.model_states import ADAM_STATE_BYTES, zero_model_states_bytes
from aiinfra.parallel.data.figures import BOOK, SLIDE

KINDS = {  # ModelStateBytes field -> (legend, colour)
    "params": ("parameters", "#1f77b4"),
    "grads": ("gradients", "#2ca02c"),
    "optimizer": ("optimizer states", "#ff7f0e"),
}
STAGES = {  # stage -> (name, what it partitions)
    0: ("DDP", "nothing partitioned"),
    1: ("ZeRO-1", "optimizer states partitioned"),
    2: ("ZeRO-2", "gradients partitioned too"),
    3: ("ZeRO-3", "parameters partitioned too"),
}


def draw_zero_stage(
    ax: Axes, stage: int, n_ranks: int, k: int = ADAM_STATE_BYTES, fs: float = BOOK
) -> None:
    """Draw each rank's bytes per parameter under ZeRO ``stage``, part by part.

    A part that a rank holds whole is plain; a part of which it holds its 1/N_d
    shard is hatched. The dashed line marks the replicated total, (2 + 2 + K).

    Args:
        ax: the panel to draw in.
        stage: 0 (DDP, nothing partitioned) to 3.
        n_ranks: N_d, the data-parallel ranks.
        k: K, optimizer bytes per parameter.
        fs: base font size, points.

    Raises:
        ValueError: ``stage`` not 0-3, ``n_ranks`` < 1 or ``k`` < 0.
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    checks.positive_int("n_ranks", n_ranks)
    if not k >= 0:
        raise ValueError(f"k (optimizer bytes per parameter) must be >= 0, got {k!r}")
    per_rank = zero_model_states_bytes(1, stage, n_ranks, k)  # bytes per parameter
    whole = zero_model_states_bytes(1, 0, n_ranks, k)
    for r in range(n_ranks):
        y, x = n_ranks - 1 - r, 0.0
        for kind, (_, colour) in KINDS.items():
            width = getattr(per_rank, kind)
            hatch = "//" if width < getattr(whole, kind) else None
            part = Rectangle((x, y - 0.35), width, 0.7, facecolor=colour, hatch=hatch)
            ax.add_patch(part).set(edgecolor="white", linewidth=1.5, gid=f"{kind}:{r}")
            x += width
        ax.text(x + 0.3, y, f"{x:g}", va="center", fontsize=fs)
    ax.axvline(whole.total, color="black", linestyle="--", linewidth=2)
    name, what = STAGES[stage]
    ax.set_title(name, loc="left", fontsize=fs + 2, fontweight="bold")
    ax.set_title(what, loc="right", fontsize=fs + 1)
    ax.set_xlim(0, whole.total * 1.12)
    ax.set_ylim(-0.6, n_ranks - 0.4)
    ax.set_yticks(range(n_ranks), [str(r) for r in reversed(range(n_ranks))])
    ax.tick_params(labelsize=fs)
    ax.set_ylabel("rank", fontsize=fs)
    ax.set_xlabel("bytes per parameter", fontsize=fs)


def _zero_legend(fig: Figure, fs: float) -> None:
    sharded = Patch(facecolor="white", edgecolor="black", hatch="//", label="sharded")
    handles = [*(Patch(facecolor=c, label=w) for w, c in KINDS.values()), sharded]
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=fs)


def zero_stage_frames(n_ranks: int, k: int = ADAM_STATE_BYTES) -> list[Figure]:
    """One slide per stage, DDP then ZeRO-1, -2 and -3: four frames."""
    frames = []
    for stage in STAGES:
        fig = Figure(figsize=(10, 5.0), layout="constrained")
        draw_zero_stage(fig.add_subplot(), stage, n_ranks, k, SLIDE)
        _zero_legend(fig, SLIDE)
        frames.append(fig)
    return frames


def zero_stage_figure(n_ranks: int, k: int = ADAM_STATE_BYTES) -> Figure:
    """The four stages' bytes per rank in a 2 x 2 grid, book size."""
    fig = Figure(figsize=(7, 4.8), layout="constrained")
    for stage, ax in zip(STAGES, fig.subplots(2, 2).flat, strict=True):
        draw_zero_stage(ax, stage, n_ranks, k, BOOK)
    _zero_legend(fig, BOOK)
    return fig
