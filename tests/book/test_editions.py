"""The book to take along: deck PDFs, the book as PDF and EPUB, the downloads page
and the front page, in both languages (``tools/editions.py``, run by the site's
build).

PDFs are read back with poppler (``pdftotext``, ``pdffonts``, ``pdfinfo``): every
font embedded, the Chinese editions' text Chinese. The EPUBs are checked with
``epubcheck`` (Debian's package; ``.ci/run`` installs it). The front page is checked
in Chromium: a card per chapter with its promise, a thumbnail that loaded, its
deck's length and links that lead to files of the site.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile

import pytest
from aiinfra_book import editions  # docs/_ext: on the path by conftest

from .chromium import _missing
from .conftest import CHAPTERS, label

LANGS = ["en", "zh_CN"]
HAN = re.compile(r"[\u4e00-\u9fff]")
CI = os.environ.get("CI") == "true"


def _poppler(tool: str, path, *args: str) -> str:
    if not shutil.which(tool):
        if CI:
            pytest.fail(f"{tool} is missing under CI (.ci/run installs poppler-utils)")
        pytest.skip(f"{tool} is not installed (apt-get install poppler-utils)")
    out = subprocess.run(
        [tool, *args, str(path), *(["-"] if tool == "pdftotext" else [])],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _pages(path) -> int:
    info = _poppler("pdfinfo", path)
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))


def _fonts_embedded(path) -> list[str]:
    """The fonts of a PDF that are not embedded (none should be)."""
    rows = _poppler("pdffonts", path).splitlines()[2:]
    assert rows, f"{path}: no fonts at all"
    # name type encoding emb sub uni object ID: "emb" is the 4th from the end
    return [r for r in rows if r.split()[-5] != "yes"]


def _need_pdfs(site):
    if not (site / editions.book_pdf("en")).exists():
        if CI or not _missing:
            pytest.fail("the editions' PDFs were not built (tools/editions.py)")
        pytest.skip(f"the PDFs need Chromium: {_missing}")


@pytest.mark.parametrize("lang", LANGS)
def test_every_deck_is_a_pdf_page_per_step_fonts_embedded(site, lang):
    _need_pdfs(site)
    decks = json.loads((site / "slides" / lang / "decks.json").read_text())
    assert sorted(decks) == sorted(CHAPTERS)
    for chapter in CHAPTERS:
        pdf = site / editions.deck_pdf(chapter, lang)
        # one page per slide, more for the steps of frames and answers
        assert _pages(pdf) > decks[chapter]["slides"], chapter
        assert _fonts_embedded(pdf) == [], chapter
        text = _poppler("pdftotext", pdf, "-q", "-l", "3")
        number = label("chapter", lang).format(n=CHAPTERS.index(chapter) + 1)
        assert re.sub(r"\s", "", number) in re.sub(r"\s", "", text), chapter
        if lang == "zh_CN":
            assert len(HAN.findall(text)) > 30, (chapter, text[:200])


@pytest.mark.parametrize("lang", LANGS)
def test_the_book_pdf_has_contents_numbered_figures_and_every_chapter(site, lang):
    _need_pdfs(site)
    pdf = site / editions.book_pdf(lang)
    assert _pages(pdf) > 150
    assert _fonts_embedded(pdf) == []
    text = _poppler("pdftotext", pdf, "-q")
    flat = re.sub(r"\s+", "", text)
    for chapter in CHAPTERS:
        page = (site / lang / chapter / "index.html").read_text(encoding="utf-8")
        title = re.search(r"<h1>(.*?)<a", page, re.S).group(1).strip()
        assert re.sub(r"\s+", "", title) in flat, (lang, chapter, title)
    # figures numbered by chapter ("Fig. 3.2", "图 3.2"); pages numbered "n / N"
    assert re.search(r"(Fig\.|图)\s*\d+\.\d+", text)
    assert re.search(r"^\s*\d+ / \d+\s*$", text, re.M)
    # the outline (bookmarks) and a table of contents at the front
    info = subprocess.run(
        ["pdfinfo", "-struct", str(pdf)], capture_output=True, text=True
    ).stdout
    assert info
    if lang == "zh_CN":
        assert len(HAN.findall(text)) > 20_000


def _epubcheck():
    found = shutil.which("epubcheck")
    if not found:
        if CI:
            pytest.fail("epubcheck is missing under CI (.ci/run installs it)")
        pytest.skip("epubcheck is not installed (apt-get install epubcheck)")
    return found


@pytest.mark.parametrize("lang", LANGS)
def test_the_epub_passes_epubcheck_and_holds_every_chapter(site, lang):
    epub = site / editions.book_epub(lang)
    with zipfile.ZipFile(epub) as z:
        assert z.namelist()[0] == "mimetype"
        assert z.read("mimetype") == b"application/epub+zip"
        pages = {
            n: z.read(n).decode("utf-8") for n in z.namelist() if n.endswith(".xhtml")
        }
    for chapter in CHAPTERS:
        assert any(n.endswith(f"{chapter}/index.xhtml") for n in pages), chapter
    text = "".join(pages.values())
    assert text.count("<math") > 500  # maths as MathML, not TeX for a script
    assert "mathjax" not in text.lower()
    if lang == "zh_CN":
        assert len(HAN.findall(text)) > 20_000
    out = subprocess.run(
        [_epubcheck(), "--quiet", str(epub)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


@pytest.mark.parametrize("lang", LANGS)
def test_the_downloads_page_lists_every_file_with_its_size(site, lang):
    page = (site / lang / "downloads.html").read_text(encoding="utf-8")
    files = [editions.book_epub(lang), editions.notebooks_zip(lang)]
    if (site / editions.book_pdf(lang)).exists():
        files += [editions.book_pdf(lang)]
        files += [editions.deck_pdf(c, lang) for c in CHAPTERS]
    for path in files:
        size = editions.size_text((site / path).stat().st_size)
        m = re.search(rf'data-fill="size:{re.escape(path)}">([^<]*)<', page)
        assert m and m.group(1) == size, path
        assert f'href="../{path}"' in page, path


@pytest.fixture(scope="module")
def front(browser, server):
    pages = {}
    for lang in LANGS:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{server}/{lang}/index.html", wait_until="load")
        pages[lang] = page.evaluate(
            """() => Array.from(document.querySelectorAll('.aiinfra-chapter-card'))
            .map(c => ({
              title: c.querySelector('.chapter-link').textContent,
              promise: c.querySelector('.chapter-promise').textContent,
              thumb: (c.querySelector('img.chapter-thumb') || {}).naturalWidth || 0,
              facts: c.querySelector('.chapter-facts').textContent,
              links: Array.from(c.querySelectorAll('a')).map(a => a.href),
            }))"""
        )
        pages[lang, "figures"] = page.evaluate(
            "Array.from(document.querySelectorAll('figure.aiinfra-front-figure img'))"
            ".map(i => i.naturalWidth)"
        )
        page.close()
    return pages


@pytest.mark.browser
@pytest.mark.skipif(bool(_missing), reason=_missing or "ok")
@pytest.mark.parametrize("lang", LANGS)
def test_the_front_page_shows_each_chapter_with_its_deck_and_downloads(
    front, server, site, lang
):
    cards = front[lang]
    assert len(cards) == len(CHAPTERS)
    decks = json.loads((site / "slides" / lang / "decks.json").read_text())
    for chapter, card in zip(CHAPTERS, cards, strict=True):
        assert card["thumb"] > 100, card["title"]
        assert len(card["promise"]) > 30, card["title"]
        assert card["promise"].rstrip().endswith((".", "。", "?", "？")), card
        assert decks[chapter]["text"] in card["facts"], card["facts"]
        for href in card["links"]:
            path = href.removeprefix(server + "/").split("#")[0]
            if path.endswith(".pdf") and not (site / path).exists():
                continue  # printed only where Chromium is (test_editions checks it)
            assert (site / path).exists(), href
        if lang == "zh_CN":
            assert HAN.search(card["promise"]), card["promise"]
    # the overview's stack and reading paths, drawn as the overview draws them
    assert len(front[lang, "figures"]) == 2
    assert all(w > 300 for w in front[lang, "figures"])
