"""A new chapter is its rst files, its package, its .po and one toctree line.

A tiny book is laid out in a temporary folder with the real ``docs/conf.py`` and
extension: a front page whose ``chapters`` toctree names one chapter, the chapter
(an index and two sections), a new subpackage, and the chapter's Chinese catalogue.
Nothing else is written (no deck file, no API page, no deck list), and the builds
must give the chapter its deck, its API page, its place on the front page, and a
Chinese edition whose table note, row label and figure text are translated.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from .conftest import DOCS, ROOT

SECTION = """\
{title}
{rule}

Prose of {name}, which moves into the speaker notes.

.. literalinclude:: /../reference/aiinfra/newpkg/thing.py
   :pyobject: {func}

.. aiinfra-table:: aiinfra.newpkg.thing:table()

   Caption of {name}.

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

msgid "message size"
msgstr "消息大小"

msgid "measured time"
msgstr "实测时间"

# Kept as it is in Chinese: it must not stop the figure's other words.
msgid "torch"
msgstr "torch"
"""


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("newbook")
    docs = root / "docs"
    docs.mkdir()
    shutil.copy(DOCS / "conf.py", docs / "conf.py")
    for shared in ("_ext", "_static", "_templates", "_bib"):
        (docs / shared).symlink_to(DOCS / shared)
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
        ".. toctree::\n   :hidden:\n\n   api/index\n"
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
    return root


def _sphinx(book: pathlib.Path, builder: str, lang: str, *tags: str) -> pathlib.Path:
    out = book / "site" / f"{builder}-{lang}"
    cmd = [sys.executable, "-m", "sphinx", "-b", builder, "-W", "--keep-going", "-q"]
    for tag in tags:
        cmd += ["-t", tag]
    cmd += [
        "-D",
        f"language={lang}",
        "-d",
        str(book / "doctrees" / f"{builder}-{lang}"),
    ]
    proc = subprocess.run(
        [*cmd, str(book / "docs"), str(out)],
        capture_output=True,
        text=True,
        cwd=book,
        timeout=300,
        env={**__import__("os").environ, "MPLBACKEND": "Agg"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_the_new_chapter_gets_its_deck_with_its_sections(book):
    out = _sphinx(book, "revealjs", "en", "slides")
    deck = (out / "newchapter" / "index.html").read_text(encoding="utf-8")
    assert "First idea" in deck and "Second idea" in deck
    assert "Prose of first" in deck.split('<aside class="notes">', 1)[1]
    assert 'href="../../../en/newchapter/index.html"' in deck
    # A title slide: the course and the chapter's number.
    assert re.search(r'<p class="deck-course">[^<]* · Chapter \d+</p>', deck)
    front = (out / "index.html").read_text(encoding="utf-8")
    # The deck list: a slide for the new deck, with its link, length and timing.
    assert re.search(r"<h[23]>New chapter</h[23]>", front)
    assert 'href="newchapter/index.html">Open the deck</a>' in front
    assert re.search(r"\d+ slides, about \d+ min", front)
    assert not (out / "api").exists(), "the API is not a deck"


def test_the_new_chapter_and_subpackage_get_their_pages_in_the_book(book):
    out = _sphinx(book, "html", "en")
    front = (out / "index.html").read_text(encoding="utf-8")
    assert 'href="../slides/en/newchapter/index.html">Slides</a>' in front
    page = (out / "newchapter" / "first.html").read_text(encoding="utf-8")
    assert 'href="../../slides/en/newchapter/index.html"' in page  # Slides button
    assert 'href="../api/newpkg.html#aiinfra.newpkg.thing.halve"' in page
    api = (out / "api" / "newpkg.html").read_text(encoding="utf-8")
    assert 'id="aiinfra.newpkg.thing.halve"' in api


def test_the_chinese_edition_translates_note_label_and_figure_text(book):
    out = _sphinx(book, "html", "zh_CN")
    page = (out / "newchapter" / "first.html").read_text(encoding="utf-8")
    assert '<p class="aiinfra-table-note">由 halve 计算的值。</p>' in page
    assert "measured on host-42" in page  # the stamp, as it is
    cells = re.findall(r"<td><p>([^<]*)</p></td>", page)
    assert cells[0] == "环形" and "fp16" in cells  # a name stays a name
    svgs = list((book / "build" / "figures" / "zh_CN").glob("*.svg"))
    assert len(svgs) == 1
    texts = re.findall(r"<!-- (.*?) -->", svgs[0].read_text(encoding="utf-8"))
    assert "消息大小" in texts and "实测时间" in texts and "torch" in texts


def test_gettext_extracts_words_but_not_stamps_or_names(book):
    out = _sphinx(book, "gettext", "en", "gettext")
    pot = (out / "newchapter.pot").read_text(encoding="utf-8")
    for message in ("Values from halve.", "ring", "message size", "measured time"):
        assert f'msgid "{message}"' in pot
    for computed in ("measured on host-42", "fp16", "1.5"):
        assert f'msgid "{computed}"' not in pot
    assert not list(out.glob("api*.pot")), "the API reference is not translated"


def test_an_incremental_build_recomputes_after_the_package_changes(book):
    """Builds are incremental, yet a page never shows a stale computed value."""
    page = book / "site" / "html-en" / "newchapter" / "second.html"
    before = _sphinx(book, "html", "en") / "newchapter" / "second.html"
    assert "<td><p>1.5</p></td>" in before.read_text(encoding="utf-8")
    # A module no page quotes: only the cache's stamp knows the pages depend on it.
    scale = book / "reference" / "aiinfra" / "newpkg" / "scale.py"
    scale.write_text("DIVISOR = 4\n")
    _sphinx(book, "html", "en")  # no -E: only the pages with computed values
    assert "<td><p>0.75</p></td>" in page.read_text(encoding="utf-8")


def test_the_chapter_list_is_the_only_list_of_chapters():
    """The repository holds no per-chapter deck file or hand-written deck list."""
    assert not list(DOCS.glob("*/slides.rst")) and not (DOCS / "decks.rst").exists()
    assert not (ROOT / "slides").exists(), "one conf.py for book and decks"
    hand_written = [
        p.name
        for p in (DOCS / "api").glob("*.rst")
        if p.name != "index.rst"
        and not p.read_text(encoding="utf-8").startswith(
            ".. Generated by aiinfra_book.api"
        )
    ]
    assert hand_written == []
