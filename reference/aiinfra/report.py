"""Tables that the book renders and the command line prints.

A function that produces a table for the book returns a :class:`Table`; the Sphinx
directive ``aiinfra-table`` turns it into a docutils table at build time, and the
``aiinfra`` command prints the same object as text or JSON. One object, two views,
so the book and the terminal cannot disagree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# What rst reads as the start of a list or a field list: a word cell (translated,
# so parsed as rst) must not start so.
LIST_START = re.compile(r"^\s*(?:[-+*•]\s|\d+[.)]\s|#\.\s|\(\w\)\s|:\w+:\s)")


@dataclass
class Table:
    """A table: column names, rows of values, a note and a stamp.

    The book translates what is words: the column headers, the cells of the
    ``words`` columns that are words (the row labels, by default), the note, and
    the stamp's words. Those must therefore be the same text at every build (a
    citation, the units, what the columns mean); whatever is computed or measured
    (the machine, the date, the sizes a function was called with) is a field of
    the note or the stamp, ``{name}`` in the text and its value in ``fields``: the
    translator translates ``"{gpus} GPUs, {requests} requests"`` once, and every
    build fills it in. A stamp without words (``"p = {p}"``, a machine and a date)
    is shown as it is in every language.

    Args:
        columns: column headers (English; the book translates them).
        rows: one list of cell values per row, ``len(columns)`` each.
        note: stable English text shown under the table, translated in the book;
            it may name ``{fields}``.
        stamp: what was computed or measured, shown under the note: a template
            whose ``{fields}`` are filled in, translated where it has words.
        words: the columns whose cells the book translates where they are words
            (stable English, like the note: ``"liquid"``, not a measured message).
        fields: the values of the note's and the stamp's ``{fields}``.

    Raises:
        TypeError: a column name, the note or the stamp is not a string.
        ValueError: a row has not ``len(columns)`` cells, a ``words`` index is not
            a column, a word cell starts like an rst list, or the ``{fields}`` the
            note and the stamp name are not the keys of ``fields``.
    """

    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    note: str = ""
    stamp: str = ""
    words: tuple[int, ...] = (0,)
    fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not all(isinstance(c, str) for c in self.columns):
            raise TypeError(f"columns must be strings, got {self.columns!r}")
        for name in ("note", "stamp"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {getattr(self, name)!r}")
        bad = [i for i in self.words if not 0 <= i < len(self.columns)]
        if bad or not isinstance(self.words, tuple):
            raise ValueError(
                f"words must be a tuple of column indices in 0..{len(self.columns) - 1}"
                f", got {self.words!r}"
            )
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(
                    f"rows[{i}] has {len(row)} cells, expected len(columns) = "
                    f"{len(self.columns)}"
                )
            for j in self.words:
                if isinstance(row[j], str) and LIST_START.match(row[j]):
                    raise ValueError(
                        f"rows[{i}][{j}] = {row[j]!r} starts like an rst list item: "
                        "the book parses its translation as rst and would drop it; "
                        "reword its start"
                    )

        named = template_fields(self.note) | template_fields(self.stamp)
        if named != set(self.fields):
            raise ValueError(
                f"fields must be exactly the {{fields}} the note and the stamp name, "
                f"{sorted(named)}, got {sorted(self.fields)}"
            )

    @property
    def note_text(self) -> str:
        """The note with its fields filled in."""
        return fill(self.note, self.fields)

    @property
    def stamp_text(self) -> str:
        """The stamp with its fields filled in."""
        return fill(self.stamp, self.fields)

    def to_text(self) -> str:
        """Render as aligned plain text, numbers right-aligned."""
        cells = [self.columns] + [[format_cell(v) for v in r] for r in self.rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [
            "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
            for row in cells
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines += [text for text in (self.note_text, self.stamp_text) if text]
        return "\n".join(lines)

    def to_json(self) -> str:
        """Render as JSON: ``{"columns", "rows", "note", "stamp"}``."""
        return json.dumps(
            {
                "columns": self.columns,
                "rows": self.rows,
                "note": self.note_text,
                "stamp": self.stamp_text,
            },
            indent=2,
        )


# A field of a note or a stamp: {name}, not a TeX group (\\frac{a}{b}) or {{.
_FIELD = re.compile(r"(?<![\\\w{}])\{([A-Za-z_]\w*)\}(?!\})")


def template_fields(text: str) -> set[str]:
    """The ``{fields}`` a note or stamp names."""
    return set(_FIELD.findall(text))


def fill(template: str, fields: dict[str, Any]) -> str:
    """A note or stamp with its ``{fields}`` replaced by their values.

    Numbers are written as :func:`format_cell` writes them; any other text, braces
    included, stays as it is.
    """
    return _FIELD.sub(lambda m: format_cell(fields[m.group(1)]), template)


#: The attribute of a matplotlib figure listing the strings drawn on it that are
#: names (packages, hosts, files): the book never makes them messages.
NAMES_ATTRIBUTE = "aiinfra_names"


def mark_names(figure: Any, names: Any) -> Any:
    """Mark ``names`` drawn on ``figure`` as names, not words to translate.

    A figure's words are the chapter's messages; a package name on a bar chart is
    data, different on every measurement, and must stay as it is.

    Returns:
        ``figure``, for chaining.
    """
    marked = set(getattr(figure, NAMES_ATTRIBUTE, ()))
    setattr(figure, NAMES_ATTRIBUTE, frozenset(marked | {str(n) for n in names}))
    return figure


def format_cell(value: Any) -> str:
    """Format one cell: floats with 4 significant digits, the rest with ``str``."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
