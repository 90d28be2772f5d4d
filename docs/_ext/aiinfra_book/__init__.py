"""Sphinx extension of the book: one package, one module per idea.

- :mod:`.compute`: values, tables and figures computed by the reference package at
  build time (``:calc:``, ``aiinfra-table``, ``aiinfra-figure``), with one disk cache
  (:mod:`.cache`) for values and figures alike. :mod:`.figures` renders a figure's
  text in the edition's language.
- :mod:`.slides`: the revealjs build. A chapter's deck is its ``index`` page with the
  chapter's toctree replaced by the sections themselves, a title slide, the learning
  objectives, a recap and the references; :mod:`.slide_layout` cuts each page into
  slides that fit 1280x720, with speaker notes (:mod:`.deck_text` writes their maths
  and citations as text).
- :mod:`.links`: links across the site (``:booklink:``, the Slides button, the
  language switch, the chapter list of the front page, the source of each listing).
- :mod:`.questions`: check-your-understanding questions (answers folded in the
  book, a fragment on a slide); :mod:`.cjk`: Chinese text without stray spaces;
  :mod:`.translation_status`: what each catalogue has translated.
- :mod:`.languages`: the editions (``docs/languages.toml``) and the words the
  build writes on a page, translated in each language's ``labels.po``.
- :mod:`.api`: the API reference pages, one per subpackage, generated from the
  package's folders.
- :mod:`.editions`: the downloads (deck PDFs, the book as PDF and EPUB), their
  file names and what their builds need (MathML, numbered figures).
- :mod:`.notebooks`: a Jupyter notebook per page of a chapter, written by the HTML
  build beside the page (helpers: :mod:`.notebook_code`).
- :mod:`.calculators`: ``aiinfra-calculator``, the package's own calculators
  running in the reader's browser (Pyodide, vendored into the site).
- :mod:`.chapters`: which folders are chapters (the ``chapters`` toctree of the
  root document): the one list every generated page is derived from.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

from . import (
    api,
    bibfiles,
    calculators,
    citations,
    cjk,
    compute,
    editions,
    figures,
    front,
    languages,
    links,
    notebooks,
    questions,
    slides,
    translation_status,
)


class MathIsNotProse(SphinxTransform):
    """Keep display math out of the translation catalogues: it reads the same in
    both languages. Runs before Sphinx's Locale transform (priority 20)."""

    default_priority = 10

    def apply(self, **kwargs: Any) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_transform(MathIsNotProse)
    for module in (
        languages,
        compute,
        figures,
        front,
        questions,
        slides,
        links,
        api,
        cjk,
        translation_status,
        bibfiles,
        citations,
        editions,
        calculators,
        notebooks,  # last: it extends the directives of compute, figures, links
    ):
        module.setup(app)
    # sphinx-revealjs is not parallel-safe, and neither is the figure cache's
    # bookkeeping: the builds run in parallel processes instead (tools/book.py).
    return {"version": "2.0", "parallel_read_safe": False, "parallel_write_safe": False}
