"""Sphinx configuration of the book (HTML, both languages).

The slide decks reuse this file from ``slides/conf.py``. Build with ``nox -s book``.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(ROOT / "reference"))

project = "AI Infrastructure"
author = "The aiinfra authors"
copyright = "2026, the aiinfra authors"  # noqa: A001
release = version = "0.1"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxcontrib.bibtex",
    "sphinx_revealjs",
    "aiinfra_book",
]

language = os.environ.get("AIINFRA_LANG", "en")
locale_dirs = ["locale/"]
# One catalogue per chapter folder (communication.po, ...): a deck that includes
# a chapter's sections is in the same folder, so it finds the same catalogue.
gettext_compact = True
gettext_uuid = False
gettext_location = True

root_doc = "index"
exclude_patterns = ["_build", "_generated", "locale", "**/slides.rst", "decks.rst"]
if tags.has("gettext"):  # noqa: F821 - Sphinx injects `tags`
    # Extract the decks' own messages too (their titles), into the same catalogues.
    exclude_patterns = ["_build", "_generated", "locale"]
templates_path = [str(DOCS / "_templates")]
nitpicky = False
suppress_warnings = ["config.cache"]

# Absolute paths: slides/conf.py reuses this file from another folder.
bibtex_bibfiles = sorted(str(p) for p in (DOCS / "_bib").glob("*.bib"))
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

autodoc_member_order = "bysource"
# Inherited docstrings (torch.autograd.Function.forward, ...) cite labels of the
# PyTorch docs that do not exist here.
autodoc_inherit_docstrings = False
autodoc_typehints = "description"
# Two packages define a ModelConfig: qualified names keep the links unambiguous.
autodoc_typehints_format = "fully-qualified"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# ------------------------------------------------------------------ HTML
html_theme = "sphinx_book_theme"
html_title = "AI Infrastructure" if language == "en" else "AI 基础设施"
html_static_path = [str(DOCS / "_static")]
html_css_files = ["book.css"]
html_theme_options = {
    "article_header_end": [
        "lang-switch.html",
        "deck-link.html",
        "article-header-buttons.html",
    ],
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,
}
# The top bar already has the search field; the sidebar needs no second one.
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "sbt-sidebar-nav.html"]}
html_last_updated_fmt = None
html_copy_source = False

# Math from the site itself: MathJax 3 (SVG output, so no font files) copied from
# the django-static-mathjax wheel into the build's static folder.
_MATHJAX_DIR = ROOT / "build" / "_mathjax"


def _vendor_mathjax() -> str:
    import mathjax  # django-static-mathjax

    src = pathlib.Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    dst = _MATHJAX_DIR / "mathjax"
    if not (dst / "tex-svg.js").exists():
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / "tex-svg.js", dst / "tex-svg.js")
    return str(_MATHJAX_DIR)


html_static_path.append(_vendor_mathjax())
mathjax_path = "mathjax/tex-svg.js"

# Chinese search: Sphinx segments Chinese with jieba; the glossary's Chinese terms
# become its user dictionary so that "全归约" is one word.
_JIEBA_DICT = ROOT / "build" / "jieba_userdict.txt"


def _glossary_dict() -> str:
    text = (DOCS / "glossary.rst").read_text(encoding="utf-8")
    terms = sorted(set(re.findall(r"^ {3}([^\s].*[\u4e00-\u9fff].*)$", text, re.M)))
    _JIEBA_DICT.parent.mkdir(parents=True, exist_ok=True)
    _JIEBA_DICT.write_text(
        "".join(f"{t.strip()} 1000 n\n" for t in terms), encoding="utf-8"
    )
    return str(_JIEBA_DICT)


if language.startswith("zh"):
    html_search_language = "zh"
    html_search_options = {"dict": _glossary_dict()}
    html_js_files = [("chinese-stemmer.js", {"priority": 100})]

# ------------------------------------------------------------------ slides
revealjs_style_theme = "white"
revealjs_static_path = [str(DOCS / "_static"), _vendor_mathjax()]
revealjs_css_files = ["revealjs/plugin/highlight/monokai.css", "slides.css"]
revealjs_script_conf = {
    "hash": True,
    "slideNumber": "c/t",
    "width": 1280,
    "height": 760,
    "margin": 0.04,
}
revealjs_script_plugins = [
    {"name": "RevealNotes", "src": "revealjs/plugin/notes/notes.js"},
    {"name": "RevealHighlight", "src": "revealjs/plugin/highlight/highlight.js"},
]
