"""Tables that the book renders and the command line prints.

A function that produces a table for the book returns a :class:`Table`; the Sphinx
directive ``aiinfra-table`` turns it into a docutils table at build time, and the
``aiinfra`` command prints the same object as text or JSON. One object, two views,
so the book and the terminal cannot disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Table:
    """A titled table: column names, rows of values and an optional note.

    Args:
        columns: column headers (English; the book translates them).
        rows: one list of cell values per row, ``len(columns)`` each.
        note: where the numbers come from (a stamp, a citation), shown under it.
    """

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, expected len(columns) = "
                    f"{len(self.columns)}"
                )

    def to_text(self) -> str:
        """Render as aligned plain text, numbers right-aligned."""
        cells = [self.columns] + [[format_cell(v) for v in r] for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [
            "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
            for row in cells
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def to_json(self) -> str:
        """Render as JSON: ``{"columns": [...], "rows": [[...]], "note": "..."}``."""
        return json.dumps(
            {"columns": self.columns, "rows": self.rows, "note": self.note}, indent=2
        )


def format_cell(value: Any) -> str:
    """Format one cell: floats with 4 significant digits, the rest with ``str``."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
