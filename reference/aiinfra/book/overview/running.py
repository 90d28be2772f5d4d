"""Where the examples run (``docs/overview/running.rst``): one code, three scales."""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

#: The three places an example runs: (title, who starts the ranks, backend, link,
#: nodes, ranks per node).
LAUNCHES = (
    ("laptop", "spawned by the package", "gloo", "loopback TCP", 1, 4),
    ("GPU node", "spawned, one per GPU", "NCCL", "NVLink", 1, 8),
    ("cluster", "torchrun on every node", "NCCL", "NVLink and InfiniBand", 2, 8),
)


def launch_figure() -> Figure:
    """The same code at three scales: who starts the ranks, and what links them."""
    fig = Figure(figsize=(10, 3.8))
    axes = fig.subplots(1, len(LAUNCHES))
    for ax, (title, starter, backend, link, nodes, per_node) in zip(
        axes, LAUNCHES, strict=True
    ):
        for node in range(nodes):
            y = 0.66 - 0.36 * node if nodes > 1 else 0.45
            ax.add_patch(
                FancyBboxPatch(
                    (0.04, y - 0.13),
                    0.92,
                    0.3,
                    boxstyle="round,pad=0.01",
                    facecolor="#f0f0f0",
                    edgecolor="#777777",
                )
            )
            for r in range(per_node):
                x = 0.1 + 0.8 * r / max(per_node - 1, 1)
                ax.scatter(x, y, s=150, color="#3182bd", zorder=3)
                ax.text(
                    x,
                    y,
                    str(node * per_node + r),
                    color="white",
                    fontsize=7,
                    ha="center",
                    va="center",
                    zorder=4,
                )
        ax.set_title(title, fontsize=13, weight="bold")
        ax.text(0.5, 0.98, starter, ha="center", va="top", fontsize=10)
        ax.text(
            0.5, 0.02, f"{backend} over {link}", ha="center", va="bottom", fontsize=10
        )
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    fig.tight_layout()
    return fig
