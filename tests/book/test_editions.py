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

import concurrent.futures
import html
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


def _title(site, lang: str, chapter: str) -> str:
    """A chapter's title as its page shows it (its ``<title>``, less the book's)."""
    page = (site / lang / chapter / "index.html").read_text(encoding="utf-8")
    title = html.unescape(re.search(r"<title>(.*?)</title>", page, re.S).group(1))
    return re.sub(r"<[^>]+>", "", title).rsplit(" \u2014 ", 1)[0].strip()


@pytest.mark.parametrize("lang", LANGS)
def test_the_book_pdf_has_contents_numbered_figures_and_every_chapter(site, lang):
    _need_pdfs(site)
    pdf = site / editions.book_pdf(lang)
    assert _pages(pdf) > 150
    assert _fonts_embedded(pdf) == []
    text = _poppler("pdftotext", pdf, "-q")
    flat = re.sub(r"\s+", "", text)
    for chapter in CHAPTERS:
        title = _title(site, lang, chapter)
        assert re.sub(r"\s+", "", title) in flat, (lang, chapter, title)
    # figures numbered by chapter ("Fig. 3.2", "图 3.2"); pages numbered "n / N"
    assert re.search(r"(Fig\.|图)\s*\d+\.\d+", text)
    assert re.search(r"^\s*\d+ / \d+\s*$", text, re.M)
    # a table of contents at the front, and the outline (bookmarks) of a PDF reader
    first = _poppler("pdftotext", pdf, "-q", "-l", "2")
    assert label("contents", lang) in first
    for chapter in CHAPTERS[:2]:
        assert _title(site, lang, chapter) in re.sub(r"\s+", " ", first)
    import pypdf

    outline = pypdf.PdfReader(pdf).outline
    assert len(outline) >= len(CHAPTERS)
    if lang == "zh_CN":
        assert len(HAN.findall(text)) > 20_000


def _epubcheck() -> list[str]:
    """The command of epubcheck (Debian installs a jar as ``/usr/bin/epubcheck``,
    run by java where no binfmt handler is set up)."""
    found = shutil.which("epubcheck")
    if not found:
        if CI:
            pytest.fail("epubcheck is missing under CI (.ci/run installs it)")
        pytest.skip("epubcheck is not installed (apt-get install epubcheck)")
    real = os.path.realpath(found)
    return ["java", "-jar", real] if real.endswith(".jar") else [found]


@pytest.fixture(scope="module")
def epubchecked(site):
    """epubcheck of each language's EPUB (both at once): ``lang -> (rc, output)``."""
    command = _epubcheck()

    def check(lang):
        out = subprocess.run(
            [*command, "--quiet", str(site / editions.book_epub(lang))],
            capture_output=True,
            text=True,
            timeout=900,
        )
        return lang, (out.returncode, out.stdout + out.stderr)

    with concurrent.futures.ThreadPoolExecutor(len(LANGS)) as pool:
        return dict(pool.map(check, LANGS))


@pytest.mark.parametrize("lang", LANGS)
def test_the_epub_passes_epubcheck_and_holds_every_chapter(site, epubchecked, lang):
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
    rc, output = epubchecked[lang]
    assert rc == 0, output[-3000:]


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
        assert len(card["promise"]) >= 20, card["title"]
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


def test_a_value_known_after_the_builds_is_filled_into_its_span():
    page = "<p>" + editions.fill_span("size:en/downloads/x.pdf", "…") + "</p>"
    assert editions.fill(page, {}) == page  # unknown: left as it is
    filled = editions.fill(page, {"size:en/downloads/x.pdf": "1.4 MB"})
    assert filled == (
        '<p><span class="aiinfra-fill" data-fill="size:en/downloads/x.pdf">1.4 MB'
        "</span></p>"
    )
    # filled again (an incremental build): the new value replaces the old one
    assert "2 MB" in editions.fill(filled, {"size:en/downloads/x.pdf": "2 MB"})
    assert editions.size_text(1_430_000) == "1.43 MB"
    assert editions.size_text(730_100) == "730 kB"
    assert editions.size_text(512) == "512 B"


def test_maths_becomes_mathml_and_a_formula_it_cannot_read_stays_tex():
    import xml.etree.ElementTree as ET

    out = editions.mathml(r"2\frac{p-1}{p}n\beta", display=True)
    root = ET.fromstring(out)
    assert root.tag.endswith("math") and root.get("display") == "block"
    aligned = editions.mathml(r"\begin{aligned} a &= b \\ c &= d \end{aligned}", True)
    ET.fromstring(aligned)  # well-formed: the alignment "&" is gone
    assert "\\" in editions.mathml(r"\frac{", display=False) or ET.fromstring(
        editions.mathml(r"\frac{", display=False)
    )


def test_an_epubs_svg_has_no_external_dtd_and_unique_ids(book_tool):
    import importlib.util

    from .conftest import ROOT

    spec = importlib.util.spec_from_file_location(
        "editions_tool", ROOT / "tools" / "editions.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    svg = (
        b'<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN"\n'
        b'  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n'
        b'<svg><image id="i1"/><image id="i1"/><g id="a:4"/>'
        b'<path id="g3" transform="scale(1)"/><path d="M 1 1"/></svg>'
    )
    clean = tool.clean_svg(svg)
    assert b"DOCTYPE" not in clean
    assert clean.count(b'id="i1"') == 1 and b'id="i1-2"' in clean
    assert b'id="a-4"' in clean and b'<path d="M 0 0" id="g3"' in clean
    assert clean.count(b" d=") == 2
