"""The book's editions (``docs/languages.toml``) and the words the build writes.

Standard library only (Babel is imported where a catalogue is read or written), so
``tools/book.py`` and ``tools/catalogues.py`` load this file by its path without
Sphinx.

- :func:`load` reads and checks ``docs/languages.toml``: one table per language, the
  first one the source language.
- :data:`LABELS` are the words the extension itself puts on a page (the Slides
  button, "Chapter 3", the deck's recap title, a speaker cue, ...), in English. The
  gettext build writes them as ``labels.pot`` (one message per label, its key as the
  ``msgctxt``), so each language translates them in ``labels.po`` like any other
  catalogue; :func:`label` returns the translation of the edition being built, the
  English while there is none.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import re
import tomllib
from dataclasses import dataclass

FILE = "languages.toml"
CODE = re.compile(r"[a-z]{2,3}(_[A-Z]{2}|_[A-Z][a-z]{3})?")
FIELDS = {
    "name": str,
    "title": str,
    "published": bool,
    "browser": str,
    "search": str,
    "cjk": bool,
}
REQUIRED = ("name", "title", "published")


@dataclass(frozen=True)
class Language:
    """One edition of the book (a table of ``docs/languages.toml``)."""

    code: str
    name: str
    title: str
    published: bool
    browser: str = ""
    search: str = ""
    cjk: bool = False


def load(docs: pathlib.Path) -> dict[str, Language]:
    """The languages of ``docs/languages.toml``, the source language first.

    Raises:
        FileNotFoundError: there is no ``languages.toml`` in ``docs``.
        ValueError: a code is not a language code (``ja``, ``zh_CN``), a table lacks
            ``name``, ``title`` or ``published``, has an unknown key or a value of
            the wrong type, or the source language is not published.
    """
    path = pathlib.Path(docs) / FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the book's languages file is missing")
    with path.open("rb") as f:
        tables = tomllib.load(f)
    if not tables:
        raise ValueError(f"{path}: no language (the source language comes first)")
    langs = {}
    for code, table in tables.items():
        where = f"{path}: [{code}]"
        if not CODE.fullmatch(code):
            raise ValueError(f"{where}: not a language code such as 'ja' or 'zh_CN'")
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table of settings")
        unknown = sorted(set(table) - set(FIELDS))
        if unknown:
            raise ValueError(f"{where}: unknown setting(s) {unknown}; known: {FIELDS}")
        for key in REQUIRED:
            if key not in table:
                raise ValueError(f"{where}: '{key}' is required")
        for key, value in table.items():
            if not isinstance(value, FIELDS[key]):
                kind = FIELDS[key].__name__
                raise ValueError(f"{where}: '{key}' must be a {kind}, got {value!r}")
        langs[code] = Language(code=code, **table)
    first = next(iter(langs.values()))
    if not first.published:
        raise ValueError(
            f"{path}: the source language {first.code!r} must be published"
        )
    return langs


def source(langs: dict[str, Language]) -> str:
    """The source language: the first table."""
    return next(iter(langs))


def translations(langs: dict[str, Language]) -> list[str]:
    """Every language but the source: those that have catalogues."""
    return list(langs)[1:]


def published(langs: dict[str, Language]) -> list[str]:
    """The languages built by default and linked from each other."""
    return [code for code, lang in langs.items() if lang.published]


def find(docs: pathlib.Path, code: str) -> Language:
    """The language ``code`` of the book in ``docs``.

    Raises:
        ValueError: ``code`` is not in ``docs/languages.toml``.
    """
    langs = load(docs)
    if code not in langs:
        raise ValueError(
            f"language {code!r} is not in {pathlib.Path(docs) / FILE} "
            f"(it has {', '.join(langs)}): add a table for it there"
        )
    return langs[code]


# The words the extension writes, in English: key -> (text, note to the translator).
LABELS = {
    "slides": ("Slides", "The button of a book page that opens the chapter's deck."),
    "book": ("Read this chapter in the book", "A deck's link to the book."),
    "notebook": (
        "Notebook",
        "The button of a book page that downloads the page as a Jupyter notebook.",
    ),
    "downloads": ("Downloads", "The front page's link to the downloads page."),
    "book_pdf": ("The book as PDF", "The downloads page: the whole book, one PDF."),
    "book_epub": ("The book as EPUB (e-readers)", "The downloads page."),
    "notebooks_zip": (
        "Every page as a Jupyter notebook (zip)",
        "The downloads page: the notebooks of all chapters in one zip.",
    ),
    "deck_pdf": (
        "Slides of “{title}” (PDF)",
        "The downloads page: one deck as PDF; keep {title}.",
    ),
    "pages": ("{n} pages", "The front page: a chapter's number of pages; keep {n}."),
    "notebooks": (
        "Notebooks (zip)",
        "The front page: a chapter's notebooks, one zip.",
    ),
    "lecture_count": (
        "{n} lectures",
        "The front page: a deck cut into lectures (slides/decks.toml); keep {n}.",
    ),
    "contents": ("Contents", "The title of the book's table of contents (its PDF)."),
    "download_what": ("What", "The downloads page: a column header."),
    "download_file": ("File", "The downloads page: a column header."),
    "download_size": ("Size", "The downloads page: a column header."),
    "not_built": (
        "not built here",
        "The downloads page: a file this build could not make (a tool missing).",
    ),
    "slides_pdf": ("Slides as PDF", "A deck's title slide: its PDF, one page a step."),
    "notebook_intro": (
        "This notebook is the page {page} of the book {book}: run it from top to "
        "bottom to compute every listing, value, table and figure of the page.",
        "The first cell of a page's notebook; keep {page} and {book}.",
    ),
    "chapter": ("Chapter {n}", "A deck's title slide; keep {n}."),
    "open_deck": ("Open the deck", "The deck list's link to one deck."),
    "question": ("Question {n}", "A check-your-understanding question; keep {n}."),
    "answer": ("Answer", "Above a question's answer."),
    "recap": ("Recap", "The title of a deck's summary slide."),
    "recap_cue": (
        "One line per section: ask the room to explain each in their words.",
        "Speaker notes of the recap slide.",
    ),
    "references": ("References", "The title of a deck's last slide."),
    "references_cue": (
        "The works this deck cites; the book's bibliography has them all.",
        "Speaker notes of the references slide.",
    ),
    "continued": (
        "Continued ({k}/{n}): the same listing or table, next part.",
        "Speaker notes of a slide that continues a listing or table; keep {k}, {n}.",
    ),
    "keypoints_cue": (
        "Key points of “{title}”: pause for questions before moving on.",
        "Speaker notes of a key-points slide; keep {title}.",
    ),
    "cue_figure": (
        "Walk through the figure: axes first, then what changes.",
        "Speaker cue of a figure slide.",
    ),
    "cue_table": (
        "Read the table row by row: what each column measures.",
        "Speaker cue of a table slide.",
    ),
    "cue_code": ("Walk through the code line by line.", "Speaker cue of a code slide."),
    "deck_length": (
        "{slides} slides, about {minutes} min",
        "The deck list: one deck's length; keep {slides} and {minutes}.",
    ),
    "section_timing": (
        "{title}: {slides} slides, {minutes} min",
        "The deck list: one section's length; keep {title}, {slides}, {minutes}.",
    ),
    "timing_rule": (
        "Suggested times read each slide's notes aloud at {wpm} words a minute "
        "({cpm} characters in Chinese), {slide} min at least per slide, plus "
        "{question} min per question.",
        "The deck list: how the times are estimated; keep every {field}.",
    ),
    "lecture": (
        "Lecture {n}",
        "A lecture of the course (slides/decks.toml); keep {n}.",
    ),
    "in_this_lecture": ("In this lecture", "The title of a lecture's agenda slide."),
    "agenda_cue": (
        "What this lecture covers, in order; the recap at the end returns to each.",
        "Speaker notes of a lecture's agenda slide.",
    ),
    "course_plan": (
        "{course}: {lectures} lectures of at most {minutes} min.",
        "The deck list of a course cut into lectures; keep every {field}.",
    ),
    "course_file": (
        "A lecturer sets the course (its title, lecturer, date, chapters and minutes "
        "per lecture) in the file slides/decks.toml of the book's sources.",
        "The deck list: where the course is set; keep slides/decks.toml.",
    ),
    "list_separator": (", ", "Between the titles of a list in one line (with space)."),
    "et_al": ("{first} et al.", "A citation of three or more authors in a deck."),
    "two_authors": ("{first} and {second}", "A citation of two authors in a deck."),
    "cite_list": ("; ", "Between two citations in one bracket (with its spaces)."),
    "cite_text_list": ("; ", "Between two citations in running text."),
    "cite_brackets": ("({inner})", "Brackets around citations; keep {inner}."),
}
FIELD = re.compile(r"\{(\w+)\}")
_ACTIVE: dict[str, dict[str, str]] = {}


def read_labels(po: pathlib.Path) -> dict[str, str]:
    """The translated labels of one ``labels.po`` (fuzzy and empty ones left out,
    and any whose ``{fields}`` differ from the English: the English is used)."""
    if not po.is_file():
        return {}
    from babel.messages.pofile import read_po

    with po.open("rb") as f:
        catalog = read_po(f)
    found = {}
    for message in catalog:
        key = message.context
        if key in LABELS and message.string and not message.fuzzy:
            if fields(message.string) == fields(LABELS[key][0]):
                found[key] = message.string
    return found


def fields(text: str) -> list[str]:
    """The ``{fields}`` of a label, sorted."""
    return sorted(FIELD.findall(text))


def labels_template():
    """``labels.pot``: one message per label, its key as context (a Babel catalog)."""
    from babel.messages.catalog import Catalog

    # A fixed creation date (SOURCE_DATE_EPOCH, as the gettext build): no diff noise.
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "1764547200"))
    created = datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC)
    catalog = Catalog(project="AI Infrastructure", fuzzy=False, creation_date=created)
    for key, (text, note) in LABELS.items():
        catalog.add(
            text,
            context=key,
            auto_comments=[note],
            locations=[("docs/_ext/aiinfra_book/languages.py", None)],
        )
    return catalog


def activate(lang: str, translated: dict[str, str]) -> None:
    """Use ``translated`` (:func:`read_labels`) for ``lang`` in :func:`label`."""
    _ACTIVE[lang] = dict(translated)


def label(key: str, lang: str, **values: object) -> str:
    """The label ``key`` in ``lang`` (English while untranslated), filled in."""
    text = _ACTIVE.get(lang, {}).get(key, LABELS[key][0])
    return text.format(**values) if values else text


def _edition(app, config) -> None:  # noqa: ANN001 - Sphinx's app and config
    """config-inited: the edition's labels and CJK setting (a change rebuilds).

    A project without ``languages.toml`` (the extension on its own) builds its one
    language with the English labels' translation from its ``labels.po``, if any.
    """
    docs = pathlib.Path(app.srcdir)
    code = config.language or "en"
    if (docs / FILE).is_file():
        config.aiinfra_cjk = find(docs, code).cjk
    labels_po = docs / "locale" / code / "LC_MESSAGES" / "labels.po"
    config.aiinfra_labels = read_labels(labels_po)
    activate(code, config.aiinfra_labels)


def build_env(lang: str, threads: int | None = None) -> dict[str, str]:
    """The environment of one edition's ``sphinx-build`` (book, decks, PDF, EPUB).

    ``AIINFRA_LANG`` names the edition; a fixed hash seed and ``SOURCE_DATE_EPOCH``
    make two builds of the same sources write the same files; figures draw with Agg.
    ``threads``: torch's intra-op threads. Builds run side by side, one process per
    core: a process whose torch spreads each operator over every core fights the
    others for them (on a loaded 2-core machine the tiled attention of the models
    chapter ran 16 times slower with 2 threads than with 1), so each gets its share
    of the cores unless ``OMP_NUM_THREADS`` is set already.
    """
    env = dict(
        os.environ,
        AIINFRA_LANG=lang,
        PYTHONHASHSEED="0",
        SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1764547200"),
    )
    env.setdefault("MPLBACKEND", "Agg")
    if threads is not None:
        env.setdefault("OMP_NUM_THREADS", str(max(1, threads)))
    return env


def run_build(
    args: list[str], lang: str, threads: int | None, cwd: pathlib.Path
) -> tuple[int, str, float]:
    """Run ``python -m sphinx *args`` for edition ``lang`` (:func:`build_env`);
    return its exit code, its output and its seconds."""
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", *args],
        env=build_env(lang, threads),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def others(docs: pathlib.Path, code: str) -> list[Language]:
    """The published editions other than ``code`` (none without the file)."""
    if not (pathlib.Path(docs) / FILE).is_file():
        return []
    langs = load(docs)
    return [langs[c] for c in published(langs) if c != code]


def _write_template(app, exception) -> None:  # noqa: ANN001
    """build-finished of the gettext build: ``labels.pot`` beside the others."""
    if exception is None and app.builder.name == "gettext":
        from babel.messages.pofile import write_po

        with open(pathlib.Path(app.outdir) / "labels.pot", "wb") as f:
            write_po(f, labels_template(), width=88, include_lineno=False)


def setup(app) -> None:  # noqa: ANN001
    app.add_config_value("aiinfra_labels", {}, "env", types=[dict])
    app.add_config_value("aiinfra_cjk", False, "env", types=[bool])
    app.connect("config-inited", _edition)
    app.connect("build-finished", _write_template)
