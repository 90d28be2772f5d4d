"""Links across the site: decks and book, the two languages, listings and the API.

Site layout (``tools/book.py build``)::

    <site>/<lang>/<page>.html                  the book
    <site>/slides/<lang>/<chapter>/index.html  a chapter's deck

- ``:booklink:`text <chapter/page>``` in a deck links to the book page, same language.
- Every book page gets a language switch to its counterpart and, in a chapter, a
  *Slides* button to the chapter's deck (template context, :func:`page_context`).
- ``.. aiinfra-chapters::`` lists the chapters: on the deck list with their decks
  and the decks' PDFs, on the book's front page as cards (:mod:`.front`).
- A ``literalinclude`` of the reference package says which module (and object) it
  quotes, linked to its API entry.
"""

from __future__ import annotations

import pathlib
import posixpath
import re
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.directives.code import LiteralInclude
from sphinx.environment import BuildEnvironment
from sphinx.util.docutils import SphinxDirective, SphinxRole

from . import front, languages
from .chapters import chapters
from .editions import chapter_notebooks_zip, deck_pdf
from .languages import label


def book_uri(fromdoc: str, page: str, lang: str) -> str:
    """From a deck page to a book page (site layout above)."""
    return "../" * (fromdoc.count("/") + 2) + f"{lang}/{page}.html"


def deck_uri(fromdoc: str, chapter: str, lang: str) -> str:
    """From a book page to a chapter's deck (site layout above)."""
    return "../" * (fromdoc.count("/") + 1) + f"slides/{lang}/{chapter}/index.html"


class BookLinkRole(SphinxRole):
    """``:booklink:`text <chapter/page>```: link a slide deck to the book page."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        m = re.fullmatch(r"(.*?)\s*<([^<>]+)>", self.text, re.S)
        if not m:
            msg = self.inliner.reporter.error(
                f":booklink: expects 'text <page>', got {self.text!r}", line=self.lineno
            )
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        text, page = m.groups()
        lang = self.config.language or "en"
        uri = book_uri(self.env.current_document.docname, page, lang)
        node = nodes.reference(self.rawtext, text, refuri=uri, classes=["booklink"])
        return [node], []


def counterpart(pagename: str, code: str) -> str:
    """The page of edition ``code`` that matches ``pagename``: the same page, but
    the API reference is English only, so a translation's counterpart of an API
    page is its ``api/index`` (which links back to the English reference)."""
    if pagename.startswith("api/") and pagename != "api/index" and code != "en":
        return "api/index"
    return pagename


def page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Give templates the other editions' URLs and the chapter's deck URL."""
    if app.builder.name != "html":
        return
    lang = app.config.language or "en"
    up = "../" * (pagename.count("/") + 1)
    context["aiinfra_lang"] = lang
    # The other published editions, each named in its own language.
    context["aiinfra_other_langs"] = [
        {
            "code": e.code,
            "name": e.name,
            "url": f"{up}{e.code}/{counterpart(pagename, e.code)}.html",
        }
        for e in languages.others(pathlib.Path(app.srcdir), lang)
    ]
    context["aiinfra_slides_label"] = label("slides", lang)
    chapter = pagename.split("/")[0]
    in_chapter = "/" in pagename and chapter in chapters(
        pathlib.Path(app.srcdir), app.config.root_doc
    )
    context["aiinfra_deck_url"] = (
        deck_uri(pagename, chapter, lang) if in_chapter else ""
    )


class chapter_list(nodes.General, nodes.Element):  # noqa: N801 - docutils style
    """Placeholder for the chapter list, filled once every title is known."""


class ChaptersDirective(SphinxDirective):
    """``.. aiinfra-chapters::``: the chapters, each with a link to its deck."""

    def run(self) -> list[nodes.Node]:
        return [chapter_list("")]


def fill_chapter_lists(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Replace each chapter list by links: the chapter (book) and its deck."""
    env, lang = app.env, app.config.language or "en"
    for placeholder in list(doctree.findall(chapter_list)):
        if app.builder.name != "revealjs":  # the book's front page: a card each
            placeholder.replace_self(front.chapter_cards(app, docname))
            continue
        items = nodes.bullet_list(classes=["aiinfra-chapters"])
        for chapter in chapters(pathlib.Path(app.srcdir), app.config.root_doc):
            index = f"{chapter}/index"
            title = env.titles[index].astext() if index in env.titles else chapter
            own = app.builder.get_relative_uri(docname, index)
            if app.builder.name == "revealjs":  # the deck list: decks, then book
                main, other = own, book_uri(docname, index, lang)
                other_text = label("book", lang)
            else:
                main, other = own, deck_uri(docname, chapter, lang)
                other_text = label("slides", lang)
            para = nodes.paragraph(
                "",
                "",
                nodes.reference("", title, refuri=main, classes=["chapter-link"]),
                nodes.Text(" · "),
                nodes.reference("", other_text, refuri=other, classes=["deck-link"]),
                nodes.Text(" · "),
                nodes.reference(  # the deck as PDF (tools/editions.py prints it)
                    "",
                    label("slides_pdf", lang),
                    refuri=f"{chapter}/{posixpath.basename(deck_pdf(chapter, lang))}",
                    classes=["deck-pdf-link"],
                ),
                nodes.Text(" · "),
                nodes.reference(  # the chapter's notebooks (aiinfra_book.notebooks)
                    "",
                    label("notebooks", lang),
                    refuri="../" * (docname.count("/") + 2)
                    + chapter_notebooks_zip(chapter, lang),
                    classes=["notebooks-link"],
                ),
            )
            items += nodes.list_item("", para)
        placeholder.replace_self(items)


class SourcedLiteralInclude(LiteralInclude):
    """``literalinclude`` that names the module it quotes and links to its API entry."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        _, abspath = self.env.relfn2path(self.arguments[0])
        path = pathlib.Path(abspath).resolve()
        package = pathlib.Path(self.config.aiinfra_package_dir).resolve()
        if package not in path.parents or path.suffix != ".py" or not result:
            return result
        if not isinstance(result[0], nodes.literal_block | nodes.container):
            return result  # an error message
        parts = path.relative_to(package.parent).with_suffix("").parts
        module = ".".join(p for p in parts if p != "__init__")
        obj = self.options.get("pyobject", "").strip()
        private = any(p.startswith("_") for p in obj.split("."))
        target = f"{module}.{obj}" if obj and not private else module
        text = f"{module}.{obj}" if obj else module
        xref = addnodes.pending_xref(
            "",
            nodes.literal(text, text),
            refdomain="py",
            reftype="obj",
            reftarget=target,
            refexplicit=True,
            refwarn=False,
            aiinfra_source=True,
        )
        source = nodes.paragraph("", "", xref, classes=["aiinfra-source"])
        listing = nodes.container("", result[0], source, classes=["aiinfra-listing"])
        return [listing, *result[1:]]


def _nearest_documented(
    app: Sphinx, env: BuildEnvironment, node: addnodes.pending_xref, contnode: Any
) -> Any:
    """A quoted object without an API entry (a private helper) links to its
    nearest documented parent: the class, else the module."""
    if not node.get("aiinfra_source"):
        return None
    domain = env.domains["py"]
    target = node["reftarget"]
    while "." in target:
        target = target.rpartition(".")[0]
        found = domain.resolve_xref(
            env,
            env.current_document.docname,
            app.builder,
            "obj",
            target,
            node,
            contnode,
        )
        if found is not None:
            return found
    return None


def setup(app: Sphinx) -> None:
    app.add_role("booklink", BookLinkRole())
    app.add_node(chapter_list)
    app.add_directive("aiinfra-chapters", ChaptersDirective)
    app.add_directive("literalinclude", SourcedLiteralInclude, override=True)
    app.connect("doctree-resolved", fill_chapter_lists)
    app.connect("html-page-context", page_context)
    app.connect("missing-reference", _nearest_documented)
