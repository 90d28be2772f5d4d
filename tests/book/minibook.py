"""A tiny book laid out in a temporary folder with the real ``docs/conf.py``,
extension and languages: a front page whose ``chapters`` toctree names one chapter,
the chapter (an index and two sections), a new subpackage, and the chapter's
Chinese catalogue (:func:`lay_out`). Builds of it take seconds, not minutes.
"""

from __future__ import annotations

import pathlib
import shutil

from .conftest import DOCS, ROOT

SECTION = """\
{title}
{rule}

Prose of {name}, which moves into the speaker notes.

A work that {name} cites :cite:p:`korthikanti2022`.

.. literalinclude:: /../reference/aiinfra/newpkg/thing.py
   :pyobject: {func}

.. aiinfra-table:: aiinfra.newpkg.thing:table()

   Caption of {name}.

.. aiinfra-table:: aiinfra.newpkg.thing:measured()

.. aiinfra-figure:: aiinfra.newpkg.thing:figure()

   The figure of {name}.

.. admonition:: Key points
   :class: keypoints

   - A key point of {name}.
"""

THING = '''\
"""A new idea of a new chapter."""

from aiinfra.newpkg.scale import DIVISOR
from aiinfra.report import Table


def halve(x: float) -> float:
    """Half of ``x``."""
    return x / DIVISOR


def table() -> Table:
    """A table with a row label that is words and one that is a name."""
    return Table(
        ["kind", "value"],
        [["ring", halve(3.0)], ["fp16", 2]],
        note="Values from halve.",
        stamp="measured on host-42",
    )


def measured() -> Table:
    """A table whose stamp is a template: words to translate, values filled in."""
    return Table(
        ["runs"],
        [["first"]],
        note="Best of {repeats}.",
        stamp="{runs} runs on {machine}",
        words=(),
        fields={"repeats": 3, "runs": 12, "machine": "host-42"},
    )


def figure():
    """A figure with words on it."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(3, 2))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="measured time")
    ax.plot([0, 1], [1, 0], label="torch")
    ax.set_xlabel("message size")
    ax.legend()
    return fig
'''

PO = """\
msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

msgid "Values from halve."
msgstr "由 halve 计算的值。"

msgid "ring"
msgstr "环形"

msgid "Best of {repeats}."
msgstr "取 {repeats} 次中的最好值。"

msgid "{runs} runs on {machine}"
msgstr "在 {machine} 上运行 {runs} 次"

msgid "message size"
msgstr "消息大小"

msgid "measured time"
msgstr "实测时间"

# Kept as it is in Chinese: it must not stop the figure's other words.
msgid "torch"
msgstr "torch"
"""


def lay_out(
    root: pathlib.Path, tools: bool = False, labels: bool = True
) -> pathlib.Path:
    """Lay out the tiny book in ``root`` (its ``docs``, package and Chinese
    catalogue; with ``tools``, a copy of ``tools/`` too, whose commands then work
    on this book; with ``labels``, the book's own translated labels); return
    ``root``."""
    docs = root / "docs"
    docs.mkdir(parents=True)
    shutil.copy(DOCS / "conf.py", docs / "conf.py")
    for shared in ("_ext", "_static", "_templates", "_bib"):
        (docs / shared).symlink_to(DOCS / shared)
    shutil.copy(DOCS / "languages.toml", docs / "languages.toml")
    # The decks' own folder: their stylesheet, and the course file (a copy: a test
    # may write its own course).
    (root / "slides").mkdir()
    (root / "slides" / "static").mkdir()
    shutil.copy(ROOT / "slides" / "static" / "slides.css", root / "slides" / "static")
    if tools:
        (root / "tools").mkdir()
        for tool in ("book.py", "catalogues.py", "editions.py"):
            shutil.copy(ROOT / "tools" / tool, root / "tools" / tool)
    (docs / "glossary.rst").write_text(":orphan:\n\nGlossary\n========\n")
    api = docs / "api"
    api.mkdir()
    shutil.copy(DOCS / "api" / "index.rst", api / "index.rst")
    # A package with the modules the extension needs, and the new subpackage.
    package = root / "reference" / "aiinfra"
    (package / "newpkg").mkdir(parents=True)
    (package / "__init__.py").write_text('"""The package."""\n')
    shutil.copy(ROOT / "reference" / "aiinfra" / "report.py", package / "report.py")
    (package / "newpkg" / "__init__.py").write_text('"""A new subpackage."""\n')
    (package / "newpkg" / "thing.py").write_text(THING)
    (package / "newpkg" / "scale.py").write_text("DIVISOR = 2\n")
    (docs / "_data").mkdir()
    # The front page: the one line that adds the chapter is "newchapter/index".
    (docs / "index.rst").write_text(
        "A book\n======\n\n.. aiinfra-chapters::\n\n"
        ".. toctree::\n   :hidden:\n   :name: chapters\n\n   newchapter/index\n\n"
        ".. toctree::\n   :hidden:\n\n   api/index\n   references\n"
    )
    # The works the chapter cites (sphinxcontrib-bibtex resolves a citation only
    # where a bibliography lists it).
    (docs / "references.rst").write_text(
        "References\n==========\n\n.. bibliography::\n"
    )
    chapter = docs / "newchapter"
    chapter.mkdir()
    (chapter / "index.rst").write_text(
        "New chapter\n===========\n\nWhat the chapter is about.\n\n"
        ".. toctree::\n\n   first\n   second\n"
    )
    for name, title, func in (
        ("first", "First idea", "halve"),
        ("second", "Second idea", "table"),
    ):
        text = SECTION.format(title=title, rule="=" * len(title), name=name, func=func)
        (chapter / f"{name}.rst").write_text(text)
    catalogue = docs / "locale" / "zh_CN" / "LC_MESSAGES"
    catalogue.mkdir(parents=True)
    (catalogue / "newchapter.po").write_text(PO, encoding="utf-8")
    # The words the build writes (Slides, Chapter 3, a citation's "et al."): the
    # book's own labels catalogue.
    if labels:
        shutil.copy(DOCS / "locale" / "zh_CN" / "LC_MESSAGES" / "labels.po", catalogue)
    return root
