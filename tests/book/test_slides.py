"""The deck layout's pieces, without a browser: notes text, code, tables, figures."""

from __future__ import annotations

import ast
import re

import pytest
from aiinfra_book import (  # noqa: E402  (conftest path)
    deck_text,
    figures,
    languages,
    slide_layout,
)
from docutils import nodes

from .conftest import DOCS
from .test_extension import _build

# ------------------------------------------------------------------ maths in notes


@pytest.mark.parametrize(
    ("tex", "text"),
    [
        (
            r"T_\text{ring} = 2(p-1)\,\alpha + 2\frac{p-1}{p}\,n\beta",
            "T_(ring) = 2(p−1) α + 2(p−1)/p nβ",
        ),
        (r"M_3 = \frac{(2 + 2 + K)\Psi}{N}", "M₃ = ((2 + 2 + K)Ψ)/N"),
        (r"\lceil \lg p \rceil(\alpha + n\beta)", "⌈ lg p ⌉(α + nβ)"),
        (r"v = (r - \text{root}) \bmod p", "v = (r − root) mod p"),
        (r"k^\ast = \sqrt{n a / c}", "k^* = √(n a / c)"),
        (r"\epsilon = 2^{-M}", "ε = 2^(−M)"),
        (r"10^9", "10⁹"),
    ],
)
def test_tex_is_written_as_text_a_speaker_reads(tex, text):
    assert deck_text.tex_to_text(tex) == text


def _all_math() -> list[str]:
    found = []
    for rst in DOCS.glob("*/*.rst"):
        if rst.parent.name == "api":
            continue
        text = rst.read_text(encoding="utf-8")
        found += re.findall(r":math:`([^`]+)`", text)
        for block in re.findall(r"^\.\. math::\n\n((?:   .*\n|\n)+)", text, re.M):
            found.append(block)
    return found


def test_no_formula_of_the_book_leaves_tex_in_the_notes():
    formulas = _all_math()
    assert len(formulas) > 100  # the book's formulas were found
    for tex in formulas:
        text = deck_text.tex_to_text(tex)
        assert not re.search(r"\\[A-Za-z]|[{}$]", text), (tex, text)


def test_a_cue_is_the_first_sentence_cut_at_a_clause():
    para = (
        "The simplest all-reduce, e.g. a star, sends every buffer to one rank. "
        "The ring keeps every link busy."
    )
    assert deck_text.first_sentence(para) == (
        "The simplest all-reduce, e.g. a star, sends every buffer to one rank."
    )
    long = (
        "In the reduce-scatter phase, partial sums travel around the ring and every "
        "rank adds its own contribution to the chunk arriving from the left neighbour."
    )
    # A clause break too early (under a third of the words) is not taken.
    assert deck_text.cue(long, words=16) == (
        "In the reduce-scatter phase, partial sums travel around the ring and every "
        "rank adds its own …"
    )
    assert deck_text.cue("A cue, cut at its last comma, before the limit here.", 8) == (
        "A cue, cut at its last comma …"
    )
    assert (
        deck_text.cue("环形算法让每条链路都忙起来。其余略。")
        == "环形算法让每条链路都忙起来。"
    )


def test_citations_are_author_year_from_the_bibliography():
    bib = deck_text.Bibliography(sorted((DOCS / "_bib").glob("*.bib")))
    assert bib.cite("patarasuk2009") == "Patarasuk and Yuan, 2009"
    assert bib.cite("thakur2005") == "Thakur et al., 2005"
    zh = DOCS / "locale" / "zh_CN" / "LC_MESSAGES" / "labels.po"
    languages.activate("zh_CN", languages.read_labels(zh))  # as the zh_CN build does
    assert bib.cite("thakur2005", "zh_CN") == "Thakur 等, 2005"
    assert bib.cite("patarasuk2009", "zh_CN") == "Patarasuk 和 Yuan, 2009"
    assert bib.entry("patarasuk2009").startswith("Patarasuk, Yuan (2009). Bandwidth")
    with pytest.raises(KeyError, match="nosuchkey"):
        bib.cite("nosuchkey")
    # Every key the book cites is in the bibliography.
    cited = set()
    for rst in DOCS.glob("*/*.rst"):
        for keys in re.findall(r":cite:[pt]:`([^`]+)`", rst.read_text("utf-8")):
            cited |= {k.strip() for k in keys.split(",")}
    assert cited and cited <= set(bib.entries)


# ------------------------------------------------------------------ code


LISTING = '''\
def scale(x: list[float], k: float) -> list[float]:
    """Multiply.

    Long docstring.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if not x:
        return []

    out = [v * k for v in x]  # the algorithm
    return out
'''


def test_code_on_a_slide_keeps_the_algorithm_not_docstrings_or_checks():
    assert slide_layout.algorithm_lines(LISTING) == [
        "def scale(x: list[float], k: float) -> list[float]:",
        "    if not x:",
        "        return []",
        "",
        "    out = [v * k for v in x]  # the algorithm",
        "    return out",
    ]


def test_a_long_listing_is_cut_between_statements():
    lines = []
    for k in range(12):
        lines += [f"x{k} = f(", f"    {k},", ")"]
    parts = slide_layout.split_code(lines, limit=15)
    assert [line for p in parts for line in p] == lines  # nothing lost or repeated
    for part in parts:
        assert len(part) <= 15
        ast.parse("\n".join(part))  # each part closes its brackets


def test_every_listing_of_the_book_fits_its_slides():
    """Each Python listing, on slides, is parts of at most CODE_LINES lines that fit
    the slide's width at 18 px or more."""
    from sphinx.directives.code import LiteralInclude, LiteralIncludeReader

    class Config:
        source_encoding = "utf-8"
        highlight_language = "python"

    pattern = re.compile(r"^\.\. literalinclude:: (\S+)\n((?:   :.*\n)*)", re.M)
    count = 0
    for rst in sorted(DOCS.glob("*/*.rst")):
        for target, opts in pattern.findall(rst.read_text("utf-8")):
            # Each option converted as the directive converts it (:dedent: 4 -> 4).
            options = {
                name: LiteralInclude.option_spec[name](value.strip() or None)
                for name, value in re.findall(r"   :([\w-]+):(.*)", opts)
            }
            path = (
                (rst.parent / target).resolve()
                if not target.startswith("/")
                else (DOCS / target.lstrip("/")).resolve()
            )
            text, _ = LiteralIncludeReader(str(path), options, Config()).read()
            lines = slide_layout.algorithm_lines(text)
            parts = slide_layout.split_code(lines)
            assert all(len(p) <= slide_layout.CODE_LINES for p in parts), rst
            assert slide_layout._font_class(lines) != "code-18", (rst, target)
            count += 1
    assert count > 40


# ------------------------------------------------------------------ tables


def _table(rows: int, cols: int = 3) -> nodes.table:
    table = nodes.table()
    group = nodes.tgroup(cols=cols)
    table += group
    head, body = nodes.thead(), nodes.tbody()
    head += nodes.row(
        "", *(nodes.entry("", nodes.paragraph("", f"h{c}")) for c in range(cols))
    )
    for r in range(rows):
        body += nodes.row(
            "", *(nodes.entry("", nodes.paragraph("", f"{r}.{c}")) for c in range(cols))
        )
    group += head
    group += body
    return table


def test_a_long_table_continues_on_slides_with_its_header():
    parts = slide_layout.fit_table(_table(25))
    sizes = [len(next(iter(p.findall(nodes.tbody)))) for p in parts]
    assert sizes == [9, 8, 8]
    for part in parts:
        header = next(iter(part.findall(nodes.thead)))[0]
        assert [e.astext() for e in header] == ["h0", "h1", "h2"]
    rows = [r.astext() for p in parts for r in next(iter(p.findall(nodes.tbody)))]
    assert rows == [r.astext() for r in next(iter(_table(25).findall(nodes.tbody)))]
    assert len(slide_layout.fit_table(_table(slide_layout.TABLE_ROWS))) == 1


def test_a_wide_table_gets_a_smaller_font():
    narrow = slide_layout.table_font_class(_table(3, cols=2))
    wide = slide_layout.table_font_class(_table(3, cols=30))
    assert int(narrow.split("-")[1]) > int(wide.split("-")[1])


# ------------------------------------------------------------------ figures


def test_smallest_text_of_an_svg_is_read_back_in_points():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3))
    ax = fig.subplots()
    ax.set_title("throughput", fontsize=11)
    ax.text(0.5, 0.5, "note", fontsize=6.5)
    ax.tick_params(labelsize=9)
    svg = figures.render_svg(fig, {}, cjk=False)
    assert figures.min_text_pt(svg) == pytest.approx(6.5, abs=0.01)
    width, height = figures.svg_size_px(svg)
    assert 500 < width < 7 * 96 and 0 < height < 3 * 96 + 1
    scale = figures.slide_text_scale(svg)
    k = min(figures.SLIDE_BOX[0] / width, figures.SLIDE_BOX[1] / height)
    # The text drawn `scale` times larger reaches 18 px on the slide (or the cap).
    assert 6.5 * scale * 96 / 72 * k >= figures.SLIDE_MIN_TEXT_PX or (
        scale == figures.MAX_TEXT_SCALE
    )


# ------------------------------------------------------------------ questions


def test_a_question_without_an_answer_fails_the_build(tmp_path):
    out = _build(tmp_path, ".. aiinfra-question::\n\n   Why?\n")
    assert out.returncode != 0
    assert "exactly one aiinfra-answer" in out.stderr


def test_a_question_folds_its_answer_in_the_book(tmp_path):
    body = """
    .. aiinfra-question::

       Why a ring?

       .. aiinfra-answer::

          Every link is busy.
    """
    out = _build(tmp_path, body)
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "out" / "index.html").read_text()
    assert '<p class="question-label">Question 1</p>' in html
    assert re.search(
        r"<details class=\"aiinfra-answer\"><summary>Answer</summary>\s*"
        r"<p>Every link is busy.</p>\s*</details>",
        html,
    )


def test_deck_fields_are_settable_on_the_command_line(book_tool):
    args = book_tool.deck_options(
        course="Systems for ML", lecturer="Dr. Li", date="2026-12-01"
    )
    assert args == [
        "-D",
        "aiinfra_deck_course=Systems for ML",
        "-D",
        "aiinfra_deck_lecturer=Dr. Li",
        "-D",
        "aiinfra_deck_date=2026-12-01",
    ]


def test_every_label_is_translated_with_its_fields_in_each_translation():
    editions = languages.load(DOCS)
    for lang in languages.translations(editions):
        po = DOCS / "locale" / lang / "LC_MESSAGES" / "labels.po"
        translated = languages.read_labels(po)  # drops a label whose fields differ
        assert set(translated) == set(languages.LABELS), (lang, po)
        for key, text in translated.items():
            assert text != languages.LABELS[key][0] or not text.strip("; "), key


def test_every_formula_defines_its_symbols_on_its_slide():
    """Each display formula of a chapter is followed by a slide-only ``symbols``
    paragraph (a formula slide says what its letters are)."""
    block = re.compile(r"^\.\. math::\n\n(?:   .*\n|\n)+", re.M)
    symbols = re.compile(
        r"\.\. only:: revealjs\n\n   \.\. rst-class:: symbols\n\n   \S"
    )
    count = 0
    for rst in sorted(DOCS.glob("*/*.rst")):
        if rst.parent.name == "api":
            continue
        text = rst.read_text(encoding="utf-8")
        for m in block.finditer(text):
            count += 1
            after = text[m.end() : m.end() + 200]
            assert symbols.match(after), f"{rst.name}: {m.group(0)[:60]!r}"
    assert count >= 15


def test_chinese_loses_stray_spaces_but_keeps_them_around_code_and_latin():
    from aiinfra_book import cjk

    para = nodes.paragraph(
        "",
        "",
        nodes.Text("使用 "),
        nodes.reference("", "全归约"),
        nodes.Text(" 的结果 "),
        nodes.literal("", "bufs"),
        nodes.Text(" 与 rank （见上）。"),
    )
    cjk.tidy_doctree(para)
    assert para.astext() == "使用全归约的结果 bufs 与 rank（见上）。"
    assert cjk.tidy("同一个 rank，在那里") == "同一个 rank，在那里"
    # Full-width punctuation next to a link, a citation or code: no space either.
    para = nodes.paragraph(
        "",
        "",
        nodes.Text("见《 "),
        nodes.reference("", "Ring AllReduce"),
        nodes.Text(" 》一节，"),
        nodes.reference("", "[Graham et al., 2016]"),
        nodes.Text(" （"),
        nodes.literal("", "NVLS"),
        nodes.Text(" ）。"),
    )
    cjk.tidy_doctree(para)
    assert para.astext() == "见《Ring AllReduce》一节，[Graham et al., 2016]（NVLS）。"
