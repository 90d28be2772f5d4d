"""The stack and the reading paths of ``docs/overview/stack.rst``: the book's map."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

#: The layers of the stack, bottom up: (layer, what it holds, chapter, or "" where
#: this edition has no chapter yet).
STACK = (
    ("accelerator", "tensor cores, on-chip memory, HBM", "Hardware"),
    ("server", "NVLink and NVSwitch, PCIe switches, network cards", "Hardware"),
    ("cluster", "fat-tree and rail networks, power, failures", "Hardware"),
    ("communication", "collectives, RDMA networks, NCCL, checkpoints", "Communication"),
    ("orchestration", "containers, Kubernetes, monitoring", "Cloud native"),
    ("training", "data, tensor, pipeline and context parallelism, ZeRO", "Training"),
    ("model", "attention, FlashAttention, mixture of experts, scaling laws", "Models"),
    ("serving", "KV cache, paging, batching, quantization, speculation", "Inference"),
)

#: Chapters in reading order, and which of them each kind of reader reads first.
CHAPTERS = (
    "Overview",
    "Hardware",
    "Communication",
    "Cloud native",
    "Training",
    "Models",
    "Inference",
)
PATHS = (
    ("new to the field", (1, 2, 3, 4, 5, 6, 7)),
    ("training engineer", (1, 5, 3, 6, 2)),
    ("inference engineer", (1, 2, 6, 7)),
    ("cluster engineer", (1, 2, 3, 4, 5)),
)


def stack_figure() -> Figure:
    """The stack from accelerator to serving, each layer with its chapter."""
    fig = Figure(figsize=(10, 5.6))
    ax = fig.add_subplot()
    shades = {"Hardware": "#c6dbef", "Communication": "#c7e9c0", "": "#eeeeee"}
    for row, (layer, holds, chapter) in enumerate(STACK):
        colour = shades.get(chapter, "#fdd0a2")
        ax.add_patch(_box(row, colour))
        ax.text(0.02, row + 0.45, layer, va="center", fontsize=12, weight="bold")
        ax.text(0.25, row + 0.45, holds, va="center", fontsize=11)
        ax.text(
            0.98,
            row + 0.45,
            chapter or "not yet in this edition",
            va="center",
            ha="right",
            fontsize=11,
            style="normal" if chapter else "italic",
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.1, len(STACK))
    ax.axis("off")
    ax.set_title("The stack, bottom up, and the chapter of each layer")
    fig.tight_layout()
    return fig


def _box(row: int, colour: str) -> FancyBboxPatch:
    return FancyBboxPatch(
        (0.005, row + 0.05),
        0.99,
        0.8,
        boxstyle="round,pad=0.005,rounding_size=0.02",
        facecolor=colour,
        edgecolor="#555555",
        linewidth=0.8,
    )


def reading_paths_figure() -> Figure:
    """Which chapters each kind of reader reads, numbered in reading order."""
    fig = Figure(figsize=(10, 3.6))
    ax = fig.add_subplot()
    for row, (_, order) in enumerate(reversed(PATHS)):
        ax.plot([min(order) - 1, max(order) - 1], [row, row], color="#cccccc", lw=1)
        for step, chapter in enumerate(order, start=1):
            ax.scatter(chapter - 1, row, s=520, color="#3182bd", zorder=3)
            ax.text(
                chapter - 1,
                row,
                str(step),
                color="white",
                ha="center",
                va="center",
                fontsize=11,
                weight="bold",
                zorder=4,
            )
    ax.set_xticks(range(len(CHAPTERS)), CHAPTERS)
    ax.set_yticks(range(len(PATHS)), [reader for reader, _ in reversed(PATHS)])
    ax.set_xlim(-0.5, len(CHAPTERS) - 0.5)
    ax.set_ylim(-0.6, len(PATHS) - 0.4)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title("Reading paths: the chapters in the order to read them")
    fig.tight_layout()
    return fig
