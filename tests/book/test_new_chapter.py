"""A new chapter is its rst files, its package, its .po and one toctree line.

The tiny book of :mod:`.minibook` adds one chapter. Nothing else is written (no
deck file, no API page, no deck list), and the builds must give the chapter its
deck, its API page, its place on the front page, and a Chinese edition whose table
note, row label and figure text are translated.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

from .conftest import DOCS, ROOT
from .minibook import lay_out


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> pathlib.Path:
    return lay_out(tmp_path_factory.mktemp("newbook"))


# Loaded by the build's Python before anything else: matplotlib then lists no system
# font at all, as on a machine without a CJK font, whatever this machine has
# installed (its directories are scanned beside fontconfig, so an empty fontconfig
# would not hide them).
NO_SYSTEM_FONTS = """\
import matplotlib.font_manager as fm

fm.findSystemFonts = lambda *args, **kwargs: []
fm.fontManager = fm.FontManager()
fm.findfont = fm.fontManager.findfont
fm.get_font_names = fm.fontManager.get_font_names
"""


def _sphinx(
    book: pathlib.Path,
    builder: str,
    lang: str,
    *tags: str,
    env: dict[str, str] | None = None,
) -> pathlib.Path:
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
        env={**__import__("os").environ, "MPLBACKEND": "Agg", **(env or {})},
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
    text = re.sub(r"<[^>]+>", "", page)
    assert "[Korthikanti et al., 2022]" in text  # the English book's own style
    assert "12 runs on host-42" in text and "Best of 3." in text
    api = (out / "api" / "newpkg.html").read_text(encoding="utf-8")
    assert 'id="aiinfra.newpkg.thing.halve"' in api


def test_the_chinese_edition_translates_note_label_and_figure_text(book, tmp_path):
    # Built where matplotlib sees no system font (and has no font list cached): the
    # figure's Chinese comes from the font the docs environment pins.
    (tmp_path / "sitecustomize.py").write_text(NO_SYSTEM_FONTS)
    hidden = {"PYTHONPATH": str(tmp_path), "MPLCONFIGDIR": str(tmp_path / "mpl")}
    out = _sphinx(book, "html", "zh_CN", env=hidden)
    page = (out / "newchapter" / "first.html").read_text(encoding="utf-8")
    assert '<p class="aiinfra-table-note">由 halve 计算的值。</p>' in page
    assert "measured on host-42" in page  # the stamp, as it is
    # A stamp with words is a template: translated once, its fields filled in.
    assert "在 host-42 上运行 12 次" in page and "取 3 次中的最好值。" in page
    # Citations in the edition's words, as its decks write them.
    assert "（Korthikanti 等, 2022）" in re.sub(r"<[^>]+>", "", page)
    cells = re.findall(r"<td><p>([^<]*)</p></td>", page)
    assert cells[0] == "环形" and "fp16" in cells  # a name stays a name
    svgs = list((book / "build" / "figures" / "zh_CN").glob("*.svg"))
    assert len(svgs) == 1
    svg = svgs[0].read_text(encoding="utf-8")
    texts = re.findall(r"<!-- (.*?) -->", svg)
    assert "消息大小" in texts and "实测时间" in texts and "torch" in texts
    # Each Chinese character is a glyph of the pinned font, not a missing-glyph box
    # (matplotlib draws those from its LastResort font).
    for label in ("消息大小", "实测时间"):
        drawn = svg.split(f"<!-- {label} -->", 1)[1].split("<!--", 1)[0]
        glyphs = re.findall(r'xlink:href="#([\w-]+)-[0-9a-f]+"', drawn)
        assert glyphs == ["NotoSansSC-Regular"] * len(label), (label, glyphs)


def test_gettext_extracts_words_but_not_stamps_or_names(book):
    out = _sphinx(book, "gettext", "en", "gettext")
    pot = (out / "newchapter.pot").read_text(encoding="utf-8")
    for message in ("Values from halve.", "ring", "message size", "measured time"):
        assert f'msgid "{message}"' in pot
    # A template, once, with its fields: not the filled-in text.
    assert 'msgid "{runs} runs on {machine}"' in pot and "12 runs" not in pot
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
    # slides/ holds what only the decks use, and nothing per chapter.
    assert sorted(
        str(p.relative_to(ROOT / "slides")) for p in (ROOT / "slides").rglob("*")
    ) == ["decks.toml", "static", "static/slides.css"]
    hand_written = [
        p.name
        for p in (DOCS / "api").glob("*.rst")
        if p.name != "index.rst"
        and not p.read_text(encoding="utf-8").startswith(
            ".. Generated by aiinfra_book.api"
        )
    ]
    assert hand_written == []
