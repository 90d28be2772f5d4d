"""The book to take along: where its downloads live, and what their builds need.

The editions are the notebooks (:mod:`.notebooks`), a PDF of every deck, and the
book as PDF and EPUB, in every published language. ``tools/editions.py`` makes the
PDFs and EPUBs after the site's builds; this module names their files (standard
library only: the tool imports it by path) and adapts the Sphinx builds behind
them:

- ``-t editions`` (``conf.py``) leaves out what only the site has (the API
  reference, the downloads page);
- the EPUB writes maths as MathML (:func:`mathml`; EPUB readers run no MathJax);
  it shares its doctrees with the single page (one reading per language);
- the book's PDF is the single-page HTML printed by Chromium: figures and computed
  tables get numbers (``numfig``) from :class:`NumberFigures`;
- ``.. aiinfra-downloads::`` is the downloads page's table: each file, its link and
  its size (filled in by ``tools/editions.py`` once the files exist, see
  :data:`FILL`).
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET
from typing import Any

#: The chapters' deck PDFs, the book's PDF and EPUB and the notebooks' zip, each
#: relative to the site's root (``build/site``).
DOWNLOADS = "downloads"


def deck_pdf(chapter: str, lang: str) -> str:
    """A chapter's deck as PDF, beside the deck."""
    return f"slides/{lang}/{chapter}/aiinfra-{chapter}-slides-{lang}.pdf"


def book_pdf(lang: str) -> str:
    return f"{lang}/{DOWNLOADS}/aiinfra-{lang}.pdf"


def book_epub(lang: str) -> str:
    return f"{lang}/{DOWNLOADS}/aiinfra-{lang}.epub"


def notebooks_zip(lang: str) -> str:
    return f"{lang}/{DOWNLOADS}/aiinfra-notebooks-{lang}.zip"


def chapter_notebooks_zip(chapter: str, lang: str) -> str:
    return f"{lang}/{DOWNLOADS}/aiinfra-notebooks-{chapter}-{lang}.zip"


#: A value the site's pages show that only exists once every build has run (a
#: file's size, a deck's length): ``<span class="aiinfra-fill" data-fill="KEY">``,
#: replaced by ``tools/editions.py`` (:func:`fill`).
FILL = re.compile(r'(<span class="aiinfra-fill" data-fill="([^"]+)">)(.*?)(</span>)')


def fill_span(key: str, fallback: str = "") -> str:
    """The HTML of a value filled in after the builds (``size:<path>``,
    ``deck:<chapter>``)."""
    return (
        f'<span class="aiinfra-fill" data-fill="{html.escape(key)}">'
        f"{html.escape(fallback)}</span>"
    )


def fill(text: str, values: dict[str, str]) -> str:
    """Put each known value into its span (unknown keys keep their text)."""

    def one(m: re.Match) -> str:
        key = html.unescape(m[2])
        value = values.get(key)
        return m[0] if value is None else f"{m[1]}{html.escape(value)}{m[4]}"

    return FILL.sub(one, text)


def size_text(size: int) -> str:
    """A file's size as a reader reads it: ``1.4 MB``, ``730 kB``."""
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size} B"


# ---------------------------------------------------------------- maths as MathML


def mathml(tex: str, display: bool) -> str:
    """MathML of a TeX formula (latex2mathml), checked to be well-formed XML; the
    TeX itself, as code, where the converter fails."""
    try:
        from latex2mathml.converter import convert

        # latex2mathml keeps an alignment "&" as text: drop it (the EPUB shows the
        # lines of an aligned block one under the other, unaligned).
        out = convert(tex, display="block" if display else "inline")
        out = out.replace("<mi>&</mi>", "").replace("<mo>&</mo>", "")
        ET.fromstring(out)
        return out
    except Exception:  # noqa: BLE001 - an unusual formula: shown as TeX
        tag = "pre" if display else "code"
        return f'<{tag} class="tex">{html.escape(tex)}</{tag}>'


def _contents_label(
    app: Any, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """The title of the printed book's table of contents, in its language."""
    from .languages import label

    context["aiinfra_contents_label"] = label("contents", app.config.language or "en")


def _mathml_for_epub(app: Any) -> None:
    if app.builder.name == "epub":
        app.add_html_math_renderer(
            "mathml", (_visit_math, None), (_visit_math_block, None)
        )


def _visit_math(self: Any, node: Any) -> None:
    self.body.append(mathml(node.astext(), display=False))
    from docutils import nodes

    raise nodes.SkipNode


def _visit_math_block(self: Any, node: Any) -> None:
    from docutils import nodes

    self.body.append(f'<div class="math">{mathml(node.astext(), display=True)}</div>')
    raise nodes.SkipNode


def setup(app: Any) -> None:
    from docutils import nodes
    from sphinx import addnodes
    from sphinx.transforms import SphinxTransform
    from sphinx.util.docutils import SphinxDirective

    class NumberFigures(SphinxTransform):
        """Give each computed figure and captioned table an id, so that
        ``numfig`` numbers it (Sphinx numbers only what has an id)."""

        default_priority = 900

        def apply(self, **kwargs: Any) -> None:
            if not self.config.numfig:
                return
            for wrapper in self.document.findall(nodes.compound):
                if "chapters" in wrapper["names"]:
                    for toctree in wrapper.findall(addnodes.toctree):
                        toctree["numbered"] = 2  # chapters and pages: "Fig. 3.2"
                        # what the toctree directive notes when it reads :numbered:
                        self.env.numbered_toctrees.add(self.env.docname)
            docname = self.env.current_document.docname.replace("/", "-")
            for k, node in enumerate(self.document.findall(nodes.figure)):
                if not node["ids"]:
                    node["ids"].append(f"{docname}-figure-{k}")
            tables = (
                t
                for t in self.document.findall(nodes.table)
                if t.next_node(nodes.title)
            )
            for k, node in enumerate(tables):
                if not node["ids"]:
                    node["ids"].append(f"{docname}-table-{k}")

    class DownloadsDirective(SphinxDirective):
        """``.. aiinfra-downloads::``: the downloads of this edition."""

        def run(self) -> list[nodes.Node]:
            return [downloads_list("")]

    app.add_node(downloads_list)
    app.add_transform(NumberFigures)
    app.add_directive("aiinfra-downloads", DownloadsDirective)
    # registered for the EPUB only: with two renderers known, an HTML build that
    # names none would pick the second
    app.connect("builder-inited", _mathml_for_epub, priority=100)
    # The EPUB's pages load no MathJax: its maths is MathML (Sphinx reads a
    # builder's ``<name>_math_renderer`` before ``html_math_renderer``).
    app.add_config_value("epub_math_renderer", "mathml", "env", types=[str])
    app.connect("html-page-context", _contents_label)
    app.connect("doctree-resolved", _fill_downloads)
    app.connect("doctree-resolved", _write_deck_lengths, priority=900)


try:
    from docutils import nodes as _nodes

    class downloads_list(_nodes.General, _nodes.Element):  # noqa: N801
        """Placeholder of the downloads table, filled once titles are known."""

except ImportError:  # pragma: no cover - the tools load this file without docutils
    downloads_list = None  # type: ignore[assignment,misc]


def _fill_downloads(app: Any, doctree: Any, docname: str) -> None:
    """The downloads table: the book (PDF, EPUB), the notebooks, each deck's PDF."""
    import pathlib

    from docutils import nodes

    from .chapters import chapters
    from .languages import label

    lang = app.config.language or "en"
    for placeholder in list(doctree.findall(downloads_list)):
        up = "../" * (docname.count("/") + 1)
        rows: list[tuple[str, str]] = [
            (label("book_pdf", lang), book_pdf(lang)),
            (label("book_epub", lang), book_epub(lang)),
            (label("notebooks_zip", lang), notebooks_zip(lang)),
        ]
        for chapter in chapters(pathlib.Path(app.srcdir), app.config.root_doc):
            index = f"{chapter}/index"
            title = (
                app.env.titles[index].astext() if index in app.env.titles else chapter
            )
            rows.append((label("deck_pdf", lang, title=title), deck_pdf(chapter, lang)))
        table = nodes.table(classes=["aiinfra-downloads"])
        group = nodes.tgroup(cols=3)
        table += group
        for width in (6, 5, 2):
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += nodes.row(
            "",
            *(
                nodes.entry("", nodes.paragraph("", label(k, lang)))
                for k in ("download_what", "download_file", "download_size")
            ),
        )
        body = nodes.tbody()
        for what, path in rows:
            name = path.rsplit("/", 1)[-1]
            link = nodes.reference("", name, refuri=up + path)
            size = nodes.raw(
                "", fill_span(f"size:{path}", label("not_built", lang)), format="html"
            )
            body += nodes.row(
                "",
                nodes.entry("", nodes.paragraph("", what)),
                nodes.entry("", nodes.paragraph("", "", link)),
                nodes.entry("", nodes.paragraph("", "", size)),
            )
        group += head
        group += body
        placeholder.replace_self(table)


def _write_deck_lengths(app: Any, doctree: Any, docname: str) -> None:
    """The decks' build, as it writes the deck list: each deck's length in
    ``decks.json`` beside it, for the book's front page (``tools/editions.py``)."""
    if app.builder.name != "revealjs" or docname != app.config.root_doc:
        return
    import json
    import pathlib

    from . import lectures as lectures_mod
    from . import slides
    from .languages import label

    lang = app.config.language or "en"
    indexes = slides.chapter_indexes(app.env)
    cfg = lectures_mod.course(app.config)
    plans = lectures_mod.course_plan(app, indexes) if cfg.splits() else {}
    found = {}
    for index in indexes:
        rows = slides.deck_timing(app, index)
        count = sum(r[1] for r in rows)
        minutes = round(sum(r[2] for r in rows))
        text = slides._plural(
            label("deck_length", lang, slides=count, minutes=minutes), lang
        )
        lectures = len(plans.get(index, [])) or 1
        if lectures > 1:
            text += label("list_separator", lang) + label(
                "lecture_count", lang, n=lectures
            )
        found[index.split("/")[0]] = {
            "slides": count,
            "minutes": minutes,
            "lectures": lectures,
            "text": text,
        }
    out = pathlib.Path(app.outdir) / "decks.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(found, ensure_ascii=False, indent=1), encoding="utf-8")
