"""The translation status of the book, computed from the catalogues at build time.

``.. aiinfra-translation-status::`` renders one row per catalogue of every language
under ``docs/locale``: its messages, how many are translated, fuzzy and missing, and
when the catalogue last changed (its last commit, else its file date). The column
headers are messages of the page's own catalogue, like any table of the book.
"""

from __future__ import annotations

import datetime
import pathlib
import subprocess

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from .compute import inline_rst, table_nodes

COLUMNS = [
    "language",
    "catalogue",
    "messages",
    "translated",
    "fuzzy",
    "missing",
    "last changed",
]


def catalogue_counts(po: pathlib.Path) -> dict[str, int]:
    """Messages, translated (not fuzzy), fuzzy and missing entries of one catalogue."""
    from babel.messages.pofile import read_po

    with open(po, "rb") as f:
        catalog = read_po(f)
    messages = [m for m in catalog if m.id]
    fuzzy = sum(1 for m in messages if m.string and m.fuzzy)
    missing = sum(1 for m in messages if not m.string)
    return {
        "messages": len(messages),
        "translated": len(messages) - fuzzy - missing,
        "fuzzy": fuzzy,
        "missing": missing,
    }


def last_changed(po: pathlib.Path) -> str:
    """The date of the catalogue's last commit (``YYYY-MM-DD``), else of the file."""
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%cs", "--", po.name],
            cwd=po.parent,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    if out:
        return out
    return datetime.date.fromtimestamp(po.stat().st_mtime).isoformat()


class TranslationStatusDirective(SphinxDirective):
    """``.. aiinfra-translation-status::``: per catalogue, what is translated."""

    has_content = True

    def run(self) -> list[nodes.Node]:
        locale = pathlib.Path(self.env.srcdir) / self.config.locale_dirs[0]
        catalogues = sorted(locale.glob("*/LC_MESSAGES/*.po"))
        for po in catalogues:
            self.env.note_dependency(str(po))
        rows = []
        for po in catalogues:
            counts = catalogue_counts(po)
            numbers = [
                counts[k] for k in ("messages", "translated", "fuzzy", "missing")
            ]
            rows.append([po.parent.parent.name, po.stem, *numbers, last_changed(po)])
        source, line = self.get_source_info()
        caption = " ".join(x.strip() for x in self.content if x.strip())
        return table_nodes(
            COLUMNS,
            rows,
            "",
            "",
            caption,
            source,
            line,
            ("translation-status",),
            inline=inline_rst(self),
        )


def setup(app: object) -> None:
    app.add_directive("aiinfra-translation-status", TranslationStatusDirective)
