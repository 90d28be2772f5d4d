"""Sphinx configuration of the slide decks (sphinx-revealjs), both languages.

The decks are built from the book's own sources (``docs/``): this file loads the
book's configuration and narrows it to the deck documents,
``docs/<chapter>/slides.rst``, each of which includes its chapter's sections.
Because a deck lives in its chapter's folder, gettext finds its messages in the same
per-chapter catalogue as the book.

Build: ``nox -s book``, or
``sphinx-build -b revealjs -c slides docs build/site/slides/en``.
"""

import pathlib

_BOOK_CONF = pathlib.Path(__file__).resolve().parents[1] / "docs" / "conf.py"
_book = {"__file__": str(_BOOK_CONF), "tags": tags}  # noqa: F821 - Sphinx injects tags
exec(compile(_BOOK_CONF.read_text(encoding="utf-8"), str(_BOOK_CONF), "exec"), _book)  # noqa: S102
globals().update({k: v for k, v in _book.items() if not k.startswith("_")})

root_doc = "decks"
exclude_patterns = ["_build", "_generated", "locale"]
include_patterns = ["decks.rst", "*/slides.rst"]
# Decks hold a subset of the book: references into pages that are not decks (the
# glossary, other sections) stay plain text here; the book build checks them.
suppress_warnings = [
    "config.cache",
    "ref.term",
    "ref.doc",
    "ref.ref",
    "toc.excluded",
    "toc.not_readable",
    "bibtex.key_not_found",
]
