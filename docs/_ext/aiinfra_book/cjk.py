"""Chinese text without stray spaces, in the book and in the decks.

reStructuredText needs whitespace around inline markup, so a translation writes
``使用 :term:`全归约 <all-reduce>` 的`` and the page shows "使用 全归约 的"; a citation
after Chinese text shows "分块 （Patarasuk 和 Yuan）". A space between two Chinese
characters, or next to full-width punctuation, is removed; a space between Chinese
and Latin text ("同一个 rank") is the usual house style and stays. Code and maths are
left alone.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx

HAN = "\u3400-\u4dbf\u4e00-\u9fff"
FULL_PUNCT = (
    "\u3000-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
    "\u2018\u2019\u201c\u201d\u2014\u2026"
)
TIGHT = f"[{HAN}{FULL_PUNCT}]"
# A run of spaces with Chinese on both sides, or full-width punctuation on one side
# (also at the edge of a text node: the other side is a link, a citation or code).
_STRAY = re.compile(
    rf"(?<=[{HAN}])[ \t\n]+(?=[{HAN}])"
    rf"|(?<=[{FULL_PUNCT}])[ \t\n]+(?=\S|$)"
    rf"|(?:(?<=\S)|^)[ \t\n]+(?=[{FULL_PUNCT}])"
)


def tidy(text: str) -> str:
    """Remove the stray spaces of one string (see the module docstring)."""
    return _STRAY.sub("", text)


def _is_code(node: nodes.Node) -> bool:
    p = node.parent
    while p is not None:
        if isinstance(
            p,
            nodes.literal_block
            | nodes.literal
            | nodes.math
            | nodes.math_block
            | nodes.raw,
        ):
            return True
        p = p.parent
    return False


def tidy_doctree(doctree: nodes.Node) -> None:
    """Apply :func:`tidy` within and across the text nodes of a doctree."""
    previous: nodes.Text | None = None
    for text in list(doctree.findall(nodes.Text)):
        if _is_code(text):
            # Code and maths keep their spaces, and so does the text around them
            # ("是 ``bufs`` 的"): Latin next to Chinese is spaced.
            previous = None
            continue
        value = tidy(str(text))
        if previous is not None and previous.parent is not None:
            before = str(previous)
            # "的 " + "全归约": the space at the boundary is stray too.
            if before.rstrip() != before and value[:1] and re.match(TIGHT, value[:1]):
                if re.search(f"{TIGHT}$", before.rstrip()) or re.match(
                    f"[{FULL_PUNCT}]", value[:1]
                ):
                    new = nodes.Text(before.rstrip())
                    previous.parent.replace(previous, new)
                    previous = new
                    before = str(new)
            if value[:1].isspace() and re.search(f"{TIGHT}$", before):
                stripped = value.lstrip()
                if stripped[:1] and re.match(TIGHT, stripped[:1]):
                    value = stripped
        if value != str(text):
            new = nodes.Text(value)
            text.parent.replace(text, new)
            text = new
        previous = text


def _resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.config.aiinfra_cjk:  # docs/languages.toml
        tidy_doctree(doctree)


def setup(app: Sphinx) -> None:
    # After the decks' layout (priority 500): their notes are tidied too.
    app.connect("doctree-resolved", _resolved, priority=700)
