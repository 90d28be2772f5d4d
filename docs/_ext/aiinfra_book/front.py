"""The front page of the book: the chapters as a reader meets them.

In the HTML book, ``.. aiinfra-chapters::`` (:mod:`.links`) shows each chapter as a
card: its number and title, its promise (the first sentence of the chapter's
``index`` page), a thumbnail of its key figure (the first figure of its pages, in
toctree order), its number of pages, its deck with the deck's length, the deck as
PDF and the chapter's notebooks as a zip. ``.. aiinfra-front-figure:: target`` shows
a figure of a chapter's page (``aiinfra.book.overview.stack:stack_figure()``) as
that page draws it, with that page's caption: the front page repeats no figure and
no caption of its own.

Everything is read from the chapters' own (translated) doctrees when the front page
is written, and the front page is written again whenever a chapter changes; the
deck's length and the files' sizes exist only after every build has run and are
filled in by ``tools/editions.py`` (:data:`.editions.FILL`).
"""

from __future__ import annotations

import pathlib
import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util.docutils import SphinxDirective

from . import compute, editions
from .chapters import chapter_pages, chapters
from .languages import label


class front_figure(nodes.General, nodes.Element):  # noqa: N801 - docutils style
    """Placeholder of a chapter page's figure shown on the front page."""


class FrontFigureDirective(SphinxDirective):
    """``.. aiinfra-front-figure:: module:expression``: the figure of that target
    as the chapter page that shows it draws it, with its caption."""

    required_arguments = 1
    final_argument_whitespace = True

    def run(self) -> list[nodes.Node]:
        target = compute.resolve(self.arguments[0], "aiinfra.book")
        return [front_figure("", target=target, classes=["aiinfra-front-figure"])]


def first_sentence(text: str) -> str:
    """The first sentence of a paragraph (English or Chinese)."""
    text = " ".join(text.split())
    m = re.match(r"(.+?[.!?])(?=\s+[A-Z(“\"])|(.+?[。！？])", text)
    if not m:
        return text
    return m[1] or m[2]


def _figures(env: BuildEnvironment, docname: str) -> list[nodes.figure]:
    if docname not in env.all_docs:
        return []
    tree = env.get_doctree(docname)
    return [f for f in tree.findall(nodes.figure) if f.get("aiinfra_target")]


def key_figure(env: BuildEnvironment, srcdir: pathlib.Path, chapter: str) -> Any:
    """The chapter's key figure: the first computed figure of its pages."""
    for page in chapter_pages(srcdir, chapter):
        found = _figures(env, f"{chapter}/{page}")
        if found:
            return found[0]
    return None


def figure_of(
    env: BuildEnvironment, target: str
) -> tuple[str, Any] | tuple[None, None]:
    """``(page, figure node)`` of the chapter page that shows ``target``."""
    for chapter in chapters(pathlib.Path(env.srcdir)):
        for page in chapter_pages(pathlib.Path(env.srcdir), chapter):
            for figure in _figures(env, f"{chapter}/{page}"):
                if figure["aiinfra_target"] == target:
                    return f"{chapter}/{page}", figure
    return None, None


def _image(figure: nodes.figure, classes: list[str]) -> nodes.image | None:
    image = figure.next_node(nodes.image)
    if image is None:
        return None
    copy = image.deepcopy()
    copy["classes"] = classes
    return copy


def promise(env: BuildEnvironment, index: str) -> str:
    """The first sentence of the chapter index's first paragraph."""
    if index not in env.all_docs:
        return ""
    tree = env.get_doctree(index)
    section = tree.next_node(nodes.section)
    if section is None:
        return ""
    para = next((c for c in section.children if isinstance(c, nodes.paragraph)), None)
    return first_sentence(para.astext()) if para is not None else ""


def chapter_cards(app: Sphinx, docname: str) -> nodes.Element:
    """The chapters of the front page, one card each (module docstring)."""
    env, lang = app.env, app.config.language or "en"
    srcdir = pathlib.Path(app.srcdir)
    up = "../" * (docname.count("/") + 1)
    cards = nodes.container(classes=["aiinfra-chapter-cards"])
    for number, chapter in enumerate(chapters(srcdir, app.config.root_doc), 1):
        index = f"{chapter}/index"
        title = env.titles[index].astext() if index in env.titles else chapter
        card = nodes.container(classes=["aiinfra-chapter-card"])
        figure = key_figure(env, srcdir, chapter)
        if figure is not None:
            image = _image(figure, ["chapter-thumb"])
            if image is not None:
                image["alt"] = title
                card += nodes.reference(
                    "", "", image, refuri=app.builder.get_relative_uri(docname, index)
                )
        body = nodes.container(classes=["chapter-card-body"])
        heading = nodes.paragraph(classes=["chapter-card-title"])
        heading += nodes.inline(
            "", label("chapter", lang, n=number) + " · ", classes=["chapter-number"]
        )
        heading += nodes.reference(
            "",
            title,
            refuri=app.builder.get_relative_uri(docname, index),
            classes=["chapter-link"],
        )
        body += heading
        body += nodes.paragraph("", promise(env, index), classes=["chapter-promise"])
        pages = len(chapter_pages(srcdir, chapter))
        facts = nodes.paragraph(classes=["chapter-facts"])
        facts += nodes.Text(label("pages", lang, n=pages))
        if app.tags.has("editions"):  # the PDF and the EPUB: no links to the site
            body += facts
            card += body
            cards += card
            continue
        facts += nodes.Text(" · ")
        deck = f"{up}slides/{lang}/{chapter}/index.html"
        facts += nodes.reference(
            "", label("slides", lang), refuri=deck, classes=["deck-link"]
        )
        facts += nodes.Text(" (")
        facts += nodes.raw(
            "", editions.fill_span(f"deck:{chapter}", "…"), format="html"
        )
        facts += nodes.Text(") · ")
        facts += nodes.reference(
            "",
            label("slides_pdf", lang),
            refuri=up + editions.deck_pdf(chapter, lang),
            classes=["deck-pdf-link"],
        )
        facts += nodes.Text(" · ")
        facts += nodes.reference(
            "",
            label("notebooks", lang),
            refuri=up + editions.chapter_notebooks_zip(chapter, lang),
            classes=["notebooks-link"],
        )
        body += facts
        card += body
        cards += card
    return cards


def fill_front_figures(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Replace each front figure by the chapter page's figure and caption."""
    for k, placeholder in enumerate(list(doctree.findall(front_figure))):
        page, figure = figure_of(app.env, placeholder["target"])
        if figure is None:
            placeholder.replace_self([])
            continue
        new = nodes.figure(
            ids=[f"front-figure-{k}"],
            classes=["aiinfra-figure", "aiinfra-front-figure"],
        )
        image = _image(figure, [])
        if image is not None:
            new += image
        caption = figure.next_node(nodes.caption)
        if caption is not None:
            # its first sentence (what the figure shows), linked to its page
            text = first_sentence(caption.astext())
            link = nodes.reference(
                "", text, refuri=app.builder.get_relative_uri(docname, page)
            )
            new += nodes.caption("", "", link)
        placeholder.replace_self(new)


def reread_front(
    app: Sphinx, env: BuildEnvironment, added: set, changed: set, removed: set
) -> list[str]:
    """The front page shows every chapter: read it again when any page changed."""
    if added or changed or removed:
        return [app.config.root_doc]
    return []


def setup(app: Sphinx) -> None:
    app.add_node(front_figure)
    app.add_directive("aiinfra-front-figure", FrontFigureDirective)
    app.connect("doctree-resolved", fill_front_figures, priority=400)
    app.connect("env-get-outdated", reread_front)
