"""What ``docs/communication/collectives.rst`` shows: the six collectives."""

from __future__ import annotations

from matplotlib.figure import Figure

from aiinfra.comm import figures


def collectives_figure() -> Figure:
    """The six collectives on four ranks: buffers before and after."""
    return figures.collectives_figure(p=4)
