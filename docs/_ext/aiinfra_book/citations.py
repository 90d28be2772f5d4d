"""Citations in the edition's language: "Korthikanti 等, 2022" in the Chinese book.

The English book cites author-year in square brackets, as sphinxcontrib-bibtex's
``author_year`` style does (``[Korthikanti et al., 2022]``). Another edition cites
with the words of its ``labels.po``, the same ones its decks use
(:meth:`.deck_text.Bibliography.cite`): "et al." and "and" from the labels
``et_al`` and ``two_authors``, the brackets from ``cite_brackets`` and the separator
between works from ``cite_list``. A reference style is registered per edition and
selected on ``config-inited``, after :mod:`.languages` has read the labels.
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

from sphinx.application import Sphinx
from sphinx.config import Config

from .languages import label

GROUP = "sphinxcontrib.bibtex.style.referencing"


def style_for(lang: str) -> type:
    """An author-year reference style with the words of ``lang``'s labels."""
    from pybtex.richtext import Text
    from sphinxcontrib.bibtex.style.referencing import BracketStyle, PersonStyle
    from sphinxcontrib.bibtex.style.referencing.author_year import (
        AuthorYearReferenceStyle,
    )

    et_al = label("et_al", lang, first="\0").split("\0", 1)[1]
    two = label("two_authors", lang, first="\0", second="\1")
    sep2 = two.split("\0", 1)[1].split("\1", 1)[0]
    left, right = label("cite_brackets", lang, inner="\0").split("\0", 1)
    between = label("cite_list", lang)

    def make_brackets() -> BracketStyle:
        return BracketStyle(left=left, right=right, sep=between)

    def make_person() -> PersonStyle:
        return PersonStyle(sep2=sep2, last_sep=sep2, other=Text(et_al))

    @dataclass
    class EditionStyle(AuthorYearReferenceStyle):
        """Author-year citations in the words of one edition."""

        bracket_textual: BracketStyle = field(default_factory=make_brackets)
        bracket_parenthetical: BracketStyle = field(default_factory=make_brackets)
        bracket_author: BracketStyle = field(default_factory=make_brackets)
        bracket_label: BracketStyle = field(default_factory=make_brackets)
        bracket_year: BracketStyle = field(default_factory=make_brackets)
        person: PersonStyle = field(default_factory=make_person)

    return EditionStyle


def _select(app: Sphinx, config: Config) -> None:
    """config-inited: another edition than the source cites in its own words."""
    from sphinxcontrib.bibtex.plugin import register_plugin

    from .languages import FILE, load, source

    lang = config.language or "en"
    docs = pathlib.Path(app.srcdir)
    if not (docs / FILE).is_file() or lang == source(load(docs)):
        return
    name = f"aiinfra_author_year_{lang}"
    register_plugin(GROUP, name, style_for(lang), force=True)
    config.bibtex_reference_style = name


def setup(app: Sphinx) -> None:
    # After languages._edition (priority 500), which reads the labels.
    app.connect("config-inited", _select, priority=600)
