"""The decks as a lecturer uses them: every slide walked in Chromium at 1280x720.

Nothing is cut off or scrolls; every slide has speaker notes without raw TeX or
empty citations; figures are legible from the back of a hall; a step-by-step figure
has one frame per step of its algorithm; the title, objectives, recap, questions and
references slides exist; the print-to-PDF export holds every line and row; the deck
list's slide counts are the decks' own.
"""

from __future__ import annotations

import functools
import importlib
import io
import re
import shutil
import subprocess

import pytest
from aiinfra_book import compute  # docs/_ext: on the path by conftest

from .chromium import _missing
from .conftest import CHAPTERS, DOCS, label
from .deck_walk import walk_many

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(bool(_missing), reason=_missing or "ok"),
]
LANGS = ["en", "zh_CN"]
MIN_FIGURE_TEXT_PX = 18  # of a 1280x720 slide: 27 px on a 1080p projector


@pytest.fixture(scope="module")
def decks(browser, server):
    """Each deck walked once: ``decks(chapter, lang)`` -> one record per slide.

    The first call walks every deck of every language, two at a time (each page
    renders in its own process: on two cores, two decks in the time of one).
    """
    walked: dict[tuple[str, str], list[dict]] = {}

    def get(chapter: str, lang: str) -> list[dict]:
        if not walked:
            urls = {
                (c, lg): f"{server}/slides/{lg}/{c}/index.html"
                for c in CHAPTERS
                for lg in LANGS
            }
            records = walk_many(browser, list(urls.values()))
            walked.update({key: records[url] for key, url in urls.items()})
        return walked[chapter, lang]

    return get


def _titles(chapter: str) -> list[str]:
    """Every section title of the chapter's pages (English)."""
    titles = []
    for rst in sorted((DOCS / chapter).glob("*.rst")):
        text = rst.read_text(encoding="utf-8")
        titles += re.findall(r"^(\S.*)\n[=-]{3,}\n", text, re.M)
    # as rendered: inline literals lose their backquotes, quotes curl
    return [t.replace("``", "").replace("'", "\u2019") for t in titles]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_nothing_on_a_slide_is_cut_or_scrolls(decks, chapter, lang):
    bad = [(s["index"], s["title"], s["cut"]) for s in decks(chapter, lang) if s["cut"]]
    assert bad == []


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_slide_has_notes_a_speaker_can_read(decks, chapter, lang):
    for s in decks(chapter, lang):
        where = (s["index"], s["title"])
        notes = s["notes_text"]
        assert notes.strip(), f"no speaker notes on {where}"
        # A citation that vanished leaves "[]" or "()" (not a call such as numel()).
        assert not re.search(r"\[\]|(?<![\w.])\(\s*\)", notes), where
        assert not re.search(r"\\[A-Za-z]+|\$", notes), (where, notes[:300])
        assert 'class="cues' in s["notes_html"], where  # cues first, then the prose


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_section_of_the_book_is_in_the_deck(decks, chapter):
    slides = {s["title"] for s in decks(chapter, "en")}
    missing = [t for t in _titles(chapter) if t not in slides]
    assert missing == []


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_figures_are_legible_from_the_back_of_the_hall(decks, chapter, lang):
    small = [
        (s["title"], f["src"], round(f["min_text_px"], 1))
        for s in decks(chapter, lang)
        for f in s["figures"]
        if f["min_text_px"] < MIN_FIGURE_TEXT_PX
    ]
    assert small == []
    assert any(s["figures"] for s in decks(chapter, lang))
    # A figure fills its slide: the full width or the full height below the title.
    thin = [
        (s["title"], f["src"], round(f["drawn_w"]), round(f["drawn_h"]))
        for s in decks(chapter, lang)
        for f in s["figures"]
        if f["drawn_w"] < 900 and f["drawn_h"] < 480
    ]
    assert thin == []


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_code_is_highlighted_as_its_language(decks, chapter):
    classes = [c for s in decks(chapter, "en") for c in s["code"]]
    assert len(classes) > 5
    # plaintext: a log quoted as it was printed; yaml, docker: the cloud's files
    langs = r"\b(language-)?(python|shell|plaintext|yaml|docker|dockerfile)\b"
    for c in classes:
        assert re.search(langs, c), c
    assert any(re.search(r"\b(language-)?python\b", c) for c in classes)


def _frames_targets(chapter: str) -> list[str]:
    """The ``:frames:`` targets of a chapter, in deck (toctree) order, each with its
    module (a page's own when it names none)."""
    index = (DOCS / chapter / "index.rst").read_text(encoding="utf-8")
    toc = index.split(".. toctree::", 1)[1].split("\n\n.. ", 1)[0]
    pages = re.findall(r"^   (\w[\w/-]*)\s*$", toc, re.M)
    found = []
    for page in pages:
        text = (DOCS / chapter / f"{page}.rst").read_text(encoding="utf-8")
        module = compute.page_module(f"{chapter}/{page}")
        found += [
            compute.resolve(t, module)
            for t in re.findall(r"^\s+:frames: (\S.*)$", text, re.M)
        ]
    return found


def _evaluate(target: str):
    module, expression = compute.split_target(target)
    return eval(expression, vars(importlib.import_module(module)))  # noqa: S307


@functools.lru_cache
def _frames_counts(chapter: str) -> list[int]:
    """How many frames the package draws for each ``:frames:`` of a chapter."""
    counts = []
    for target in _frames_targets(chapter):
        frames = _evaluate(target)
        counts.append(len(frames))
        for f in frames:
            f.clear()
    return counts


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_each_algorithm_steps_frame_by_frame(decks, chapter, lang):
    """A ``:frames:`` figure is one slide whose frames the arrow key advances: as
    many frames as the package draws (one per step: the package's tests check the
    steps against the algorithm), all but the first a fragment."""
    expected = _frames_counts(chapter)
    stacks = [s for s in decks(chapter, lang) if s["frames"]]
    assert [s["frames"] for s in stacks] == expected
    for s in stacks:
        fragments = [f for f in s["figures"] if f["fragment"]]
        assert len(fragments) == s["frames"] - 1, s["title"]


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_deck_has_the_structure_of_a_lecture(decks, chapter, lang):
    slides = decks(chapter, lang)
    number = CHAPTERS.index(chapter) + 1
    assert label("chapter", lang).format(n=number) in slides[0]["text"]
    titles = [s["title"] for s in slides]
    # The references close the deck (several slides when it cites many works), in
    # the deck's language: labels.po, not English.
    assert titles[-1].startswith(label("references", lang))
    assert titles[-1].startswith({"en": "References", "zh_CN": "参考文献"}[lang])
    # The recap, one line per page, on one slide or, for a long chapter, several
    # ("Recap (1/2)"), before the questions.
    recaps = [i for i, t in enumerate(titles) if t.startswith(label("recap", lang))]
    assert recaps and recaps == list(range(recaps[0], recaps[0] + len(recaps)))
    if len(recaps) > 1:
        assert titles[recaps[-1]].endswith(f"({len(recaps)}/{len(recaps)})")
    questions = [s for s in slides if label("question", lang).format(n=1) in s["text"]]
    assert questions, "the chapter's questions are in its deck"
    # The answer is not on screen until the next key press.
    assert all(s["fragments"] >= 1 for s in questions)
    assert recaps[-1] < slides.index(questions[0])
    assert slides[1]["text"].count("\n") >= 3, "learning objectives on slide 2"


def _pdf_text(pdf: bytes) -> str:
    """The text of a PDF: poppler's ``pdftotext`` where installed (CI installs it;
    fast on pages of vector figures), else pypdf (pure Python, slower)."""
    if shutil.which("pdftotext"):
        out = subprocess.run(
            ["pdftotext", "-q", "-raw", "-", "-"],
            input=pdf,
            capture_output=True,
            check=True,
        )
        return out.stdout.decode("utf-8")
    import pypdf

    return "".join(p.extract_text() for p in pypdf.PdfReader(io.BytesIO(pdf)).pages)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_print_to_pdf_keeps_every_line_and_row(browser, server, chapter):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        # Fragments shown at once: by default each step of a frames stack (and each
        # answer) is a page of its own, which adds pages but no line or row.
        url = f"{server}/slides/en/{chapter}/index.html"
        page.goto(f"{url}?print-pdf&pdfSeparateFragments=false")
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        page.wait_for_timeout(500)
        lines = page.evaluate(
            "Array.from(document.querySelectorAll('.reveal pre code'))"
            ".flatMap(c => c.textContent.split('\\n'))"
        )
        cells = page.evaluate(
            "Array.from(document.querySelectorAll('.reveal table td'))"
            ".map(c => c.textContent)"
        )
        pdf = page.pdf(width="1280px", height="720px", print_background=True)
    finally:
        page.close()
    text = _pdf_text(pdf)
    flat = re.sub(r"\s+", "", text)
    missing = [x for x in lines + cells if re.sub(r"\s+", "", x) not in flat]
    assert len(lines) > 50 and len(cells) > 20
    assert missing == []


@pytest.mark.parametrize("lang", LANGS)
def test_deck_list_gives_each_decks_length_and_timing(decks, browser, server, lang):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{server}/slides/{lang}/index.html")
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        text = page.text_content(".reveal .slides")
    finally:
        page.close()
    for chapter in CHAPTERS:
        count = len(decks(chapter, lang))
        pattern = (
            re.escape(label("deck_length", lang))
            .replace(re.escape("{slides}"), str(count))
            .replace(re.escape("{minutes}"), r"\d+")
        )
        assert re.search(pattern, text), (chapter, count)
    assert len(re.findall(r"\d+ (?:min|分钟)", text)) > 3 * len(CHAPTERS)


def test_speaker_view_shows_the_current_slides_notes(browser, server):
    chapter = CHAPTERS[0]
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    try:
        page = context.new_page()
        page.goto(f"{server}/slides/en/{chapter}/index.html#/1")
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
        with context.expect_page() as popup:
            page.keyboard.press("s")  # reveal.js's speaker view
        speaker = popup.value
        speaker.wait_for_load_state()
        speaker.wait_for_function(
            "document.querySelector('.speaker-controls-notes .value') && "
            "document.querySelector('.speaker-controls-notes .value').textContent"
            ".length > 20",
            timeout=20_000,
        )
        shown = speaker.inner_text(".speaker-controls-notes .value")
        expected = page.evaluate("Reveal.getSlideNotes()")
        assert shown.split()[:5] == re.sub(r"<[^>]+>", " ", expected).split()[:5]
    finally:
        context.close()
