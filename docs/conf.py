"""Sphinx configuration of the book and of its slide decks, both languages.

One file for every build (``tools/book.py`` runs them; ``nox -s book``):

- the book: ``sphinx-build -b html docs build/site/en``;
- the decks: ``sphinx-build -b revealjs -t slides docs build/site/slides/en``: the
  ``slides`` tag narrows the sources to the front page and the chapters, each
  chapter's ``index`` becoming its deck (``docs/_ext/aiinfra_book/slides.py``);
- another edition: ``-D language=zh_CN`` (or ``AIINFRA_LANG=zh_CN``); the editions
  and their settings are ``docs/languages.toml``;
- the catalogues: ``-b gettext -t gettext``.
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

from aiinfra_book import decks  # noqa: E402
from aiinfra_book.chapters import chapter_pages, chapters  # noqa: E402
from aiinfra_book.languages import find  # noqa: E402

project = "AI Infrastructure"
author = "The aiinfra authors"
copyright = "2026, the aiinfra authors"  # noqa: A001
release = version = "0.1"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxcontrib.bibtex",
    "sphinx_copybutton",
    "sphinx_revealjs",
    "aiinfra_book",
]

language = os.environ.get("AIINFRA_LANG", "en")
locale_dirs = ["locale/"]
# One catalogue per chapter folder (communication.po, ...): the chapter's deck is
# built from the same pages, so it reads the same catalogue.
gettext_compact = True
gettext_uuid = False
gettext_location = True

root_doc = "index"
exclude_patterns = ["_build", "locale", "api/.gitignore"]
templates_path = [str(DOCS / "_templates")]
nitpicky = False
suppress_warnings = ["config.cache"]

if tags.has("slides"):  # noqa: F821 - Sphinx injects `tags`
    # The decks: the front page (the deck list) and the chapters (the decks).
    include_patterns = ["index.rst", *(f"{c}/**" for c in chapters(DOCS))]
    # Decks hold a subset of the book: references into pages that are not in a deck
    # (the glossary, the bibliography, the API) stay plain text; the book checks them.
    suppress_warnings += [
        "ref.term",
        "ref.doc",
        "ref.ref",
        "toc.excluded",
        "toc.not_readable",
        "bibtex.key_not_found",
    ]
if tags.has("editions"):  # noqa: F821
    # The book to take along (tools/editions.py: EPUB, and the single page that
    # Chromium prints as the PDF): the chapters and the reference pages a reader
    # reads, without the API reference (the site has it) or the downloads page.
    exclude_patterns += ["api/**", "downloads.rst"]
    suppress_warnings += ["toc.excluded", "toc.not_readable", "ref.doc"]
    # an incremental EPUB build finds the backup of its previous build info
    suppress_warnings += ["epub.unknown_project_files"]
if tags.has("gettext"):  # noqa: F821
    # The API reference is generated from English docstrings: not translated.
    exclude_patterns += ["api/**"]
    suppress_warnings += ["toc.excluded"]

bibtex_bibfiles = sorted(str(p) for p in (DOCS / "_bib").glob("*.bib"))
bibtex_default_style = "plain"
bibtex_reference_style = "author_year"

autodoc_member_order = "bysource"
# Inherited docstrings (torch.autograd.Function.forward, ...) cite labels of the
# PyTorch docs that do not exist here.
autodoc_inherit_docstrings = False
# Types in the signature: as a field of each argument ("description") every type
# became a cross-reference that Sphinx resolved by a search through every object
# (about 15 % of the English build).
autodoc_typehints = "signature"
# Two packages may define a class of one name: qualified names keep links unambiguous.
autodoc_typehints_format = "fully-qualified"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# A console block's prompt is not copied, nor is a Python prompt.
copybutton_prompt_text = r"\$ |>>> |\.\.\. "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = False

# ------------------------------------------------------------------ HTML
html_theme = "sphinx_book_theme"
html_static_path = [str(DOCS / "_static")]
html_css_files = ["book.css"]
html_theme_options = {
    "article_header_end": [
        "lang-switch.html",
        "deck-link.html",
        "notebook-link.html",
        "article-header-buttons.html",
    ],
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": False,
    # The sidebar expands the current chapter only: rendering every chapter's pages
    # into every page's sidebar was a third of the book's build time.
    "collapse_navbar": True,
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
        tmp = dst / f"tex-svg.js.{os.getpid()}.tmp"
        shutil.copy(src / "tex-svg.js", tmp)
        os.replace(tmp, dst / "tex-svg.js")  # atomic: the parallel builds read it
    return str(_MATHJAX_DIR)


html_static_path.append(_vendor_mathjax())
mathjax_path = "mathjax/tex-svg.js"
# Named: the extension registers a second renderer, MathML, for the EPUB only.
html_math_renderer = "mathjax"

if tags.has("editions"):  # noqa: F821
    # Figures and tables numbered; a plain theme that prints well (PDF) and the
    # EPUB's own (aiinfra_book.editions writes its maths as MathML: no script
    # runs in an e-reader). The single page and the EPUB share one doctree folder.
    numfig = True
    numfig_secnum_depth = 1
    html_theme = "basic"
    html_sidebars = {"**": []}
    templates_path = [str(DOCS / "_templates" / "editions"), *templates_path]
    html_theme_options = {}
    epub_basename = "aiinfra"
    epub_language = language.replace("_", "-")  # a BCP 47 tag: zh-CN
    epub_theme = "epub"
    epub_title = project
    epub_author = author
    epub_publisher = author
    epub_copyright = copyright
    epub_identifier = "aiinfra"
    epub_scheme = "URL"
    epub_uid = "aiinfra"
    epub_show_urls = "no"
    epub_css_files = ["editions.css"]
    html_css_files = ["book.css", "editions.css"]

# Chinese search: Sphinx segments Chinese with jieba; the glossary's Chinese terms
# become its user dictionary so that "全归约" is one word.
_JIEBA_DICT = ROOT / "build" / "jieba_userdict.txt"


def _glossary_dict() -> str:
    text = (DOCS / "glossary.rst").read_text(encoding="utf-8")
    terms = sorted(set(re.findall(r"^ {3}([^\s].*[\u4e00-\u9fff].*)$", text, re.M)))
    content = "".join(f"{t.strip()} 1000 n\n" for t in terms)
    # Written only when it changes: the parallel builds read it.
    if not _JIEBA_DICT.exists() or _JIEBA_DICT.read_text(encoding="utf-8") != content:
        _JIEBA_DICT.parent.mkdir(parents=True, exist_ok=True)
        tmp = _JIEBA_DICT.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(content, encoding="utf-8")
        os.replace(tmp, _JIEBA_DICT)
    return str(_JIEBA_DICT)


def _edition(app, config) -> None:  # noqa: ANN001 - Sphinx's app and config
    """The edition's title and search (``docs/languages.toml``), for the language
    Sphinx builds (``-D language=...`` included)."""
    lang = find(DOCS, config.language or "en")
    config.html_title = lang.title
    config.epub_title = lang.title
    if lang.search:
        config.html_search_language = lang.search
    if lang.search == "zh":
        config.html_search_options = {"dict": _glossary_dict()}
        config.html_js_files = [("chinese-stemmer.js", {"priority": 100})]


def setup(app) -> None:  # noqa: ANN001
    app.connect("config-inited", _edition)


# ------------------------------------------------------------------ slides
# What only the decks use lives in slides/: their stylesheet and the lecturer's file
# slides/decks.toml (the course, its lecturer and date, its chapters, minutes per
# lecture); `tools/book.py build --deck-course ...` overrides the title slide's lines.
SLIDES = ROOT / "slides"
_course = decks.load(
    ROOT / decks.FILE,
    chapters(DOCS),
    {c: chapter_pages(DOCS, c) for c in chapters(DOCS)},
)
aiinfra_course = _course.as_dict()
aiinfra_deck_course = _course.title
aiinfra_deck_lecturer = _course.lecturer
aiinfra_deck_date = _course.date
revealjs_style_theme = "white"
revealjs_static_path = [str(SLIDES / "static"), _vendor_mathjax()]
revealjs_css_files = ["slides.css"]
revealjs_script_conf = {
    "hash": True,
    "slideNumber": "c/t",
    "width": 1280,
    "height": 720,
    "margin": 0.04,
}
revealjs_script_plugins = [
    {"name": "RevealNotes", "src": "revealjs/plugin/notes/notes.js"},
    {"name": "RevealHighlight", "src": "revealjs/plugin/highlight/highlight.js"},
]
