"""The bit layouts of the mixed-precision section, drawn at build time.

One row per format of :data:`aiinfra.precision.formats.DTYPES`, one box per bit,
coloured by field: sign, exponent (range), mantissa (precision). The widths come from
:func:`aiinfra.precision.formats.float_format`, which reads them from
``torch.finfo``, so the picture cannot disagree with the table. Figures are built
with ``matplotlib.figure.Figure`` (no pyplot state), as every figure of the book.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra.precision.formats import DTYPES, float_format

COLOURS = {"sign": "#d62728", "exponent": "#1f77b4", "mantissa": "#2ca02c"}


def bit_layout_figure(names: tuple[str, ...] = tuple(DTYPES)) -> Figure:
    """Draw sign, exponent and mantissa bits of each format, aligned at the sign.

    Args:
        names: formats to draw, top to bottom.

    Returns:
        A matplotlib figure.

    Raises:
        ValueError: an unknown format name.
    """
    formats = [float_format(n) for n in names]
    fig = Figure(figsize=(9, 0.55 * len(formats) + 0.9))
    ax = fig.add_subplot()
    for row, f in enumerate(formats):
        y = len(formats) - 1 - row
        fields = [
            ("sign", f.sign_bits),
            ("exponent", f.exponent_bits),
            ("mantissa", f.mantissa_bits),
        ]
        x = 0
        for field, width in fields:
            for _ in range(width):
                ax.add_patch(
                    Rectangle(
                        (x, y + 0.1), 1, 0.8, facecolor=COLOURS[field], edgecolor="w"
                    )
                )
                x += 1
            if width:
                ax.text(
                    x - width / 2,
                    y + 0.5,
                    str(width),
                    ha="center",
                    va="center",
                    color="w",
                    fontsize=8,
                    fontweight="bold",
                )
        ax.text(-0.8, y + 0.5, f.name, ha="right", va="center", fontsize=10)
    ax.set_xlim(-6, 33)
    ax.set_ylim(-0.2, len(formats))
    ax.axis("off")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(
        handles,
        list(COLOURS),
        loc="upper right",
        ncol=3,
        frameon=False,
        bbox_to_anchor=(1.0, 1.12),
    )
    fig.tight_layout()
    return fig
