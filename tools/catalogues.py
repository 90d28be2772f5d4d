"""What a translator has left to do, read from the catalogues alone.

    python tools/catalogues.py check   # every problem; exit status 1 if there is one
    python tools/catalogues.py todo    # the same list, per chapter; exit status 0
    python tools/catalogues.py update --pot build/gettext   # merge new English in

``update`` (run by ``nox -s translate`` after the gettext build) merges the templates
into the catalogues as ``sphinx-intl update`` does, and also: a fuzzy entry keeps
the English it was translated from as ``#| msgid`` (the translator sees what
changed); a new entry whose English contains, or is contained in, an obsolete
entry's English (a paragraph that lost or gained a sentence) starts from that
translation, marked fuzzy; and once a catalogue has nothing missing or fuzzy left,
its obsolete entries, which nothing can use any more, are dropped. Wrapping is the
same on every run (88 columns) and references name the file without a line number,
so a diff shows what changed in the English or the Chinese, nothing else.

Needs only Babel (installed with Sphinx), so it runs in the docs environment and
without the test suite. Each line names the ``.po`` file and line, the rst file and
line the message comes from, its state and what to do:

- ``missing``: no translation yet; write the ``msgstr``.
- ``fuzzy``: the English changed since it was translated; compare with the English,
  fix the ``msgstr`` and delete the ``#, fuzzy`` line.
- ``stale``: an obsolete ``#~`` entry whose English no longer exists; reuse its
  translation where it fits, then delete it (``nox -s translate`` keeps it until
  then).
- ``roles``: the translation does not copy a ``:calc:``, ``:cite:`` or ``:math:``
  role of the English verbatim.
- ``markup``: a Chinese character touches a role, a literal or an emphasis
  (``为:math:`x```, ``*缺失*条目``): rst then shows the raw markup; put a space
  between them.
- ``fields``: a label of ``labels.po`` (the words the build writes) or a table's
  note or stamp lost or renamed a ``{field}`` of the English; the build would show
  the English, or a field unfilled, instead.
- ``kind``: rst reads the translation as a list, not as text (it starts with
  ``+ ``, ``- ``, ``1. ``...); Sphinx then drops it and shows the English.
- ``ratio``: a reduction written as a multiple (``小了 8 倍``); Chinese editors read it
  as a logic error: ``只有原来的 1/8``.

Without ``--lang``, every language of ``docs/languages.toml`` but the source one.
"""

from __future__ import annotations

import argparse
import datetime
import io
import pathlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from babel.messages.catalog import Catalog
from babel.messages.pofile import normalize, read_po, unescape, write_po

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LOCALE = DOCS / "locale"


# docs/languages.toml, read by the extension's own module (standard library only).
sys.path.insert(0, str(DOCS / "_ext" / "aiinfra_book"))
import languages  # noqa: E402

ROLE = re.compile(r":(?:calc|cite:p|cite:t|math):`[^`]*`")
TODO = {
    "missing": "write the translation",
    "fuzzy": "compare with the English, fix it, delete the '#, fuzzy' line",
    "stale": "reuse the old translation where it fits, then delete the entry",
    "roles": "copy every :calc:, :cite: and :math: role of the English verbatim",
    "markup": "put a space between Chinese text and a role or ``literal`` (rst needs "
    "it to see the markup; the book removes it again)",
    "fields": "keep every {field} of the English, spelled as it is",
    "kind": "rst reads the translation as a list, not as text (a leading '+ ', "
    "'- ', '* ' or '1. '), and Sphinx drops it: reword its start",
    "ratio": "'小/少/低 N 倍' reads as a logic error to a Chinese editor: write "
    "'只有原来的 1/N' or '是原来的 1/N'",
}
# A block rst reads as a list, an enumeration or a field list: a translation that
# starts this way while its English does not loses its text (Sphinx drops it).
BLOCK_START = re.compile(r"^\s*(?:[-+*•]\s|\d+[.)]\s|#\.\s|\(\w\)\s|:\w+:\s)")
# "小了 8 倍", "少 :calc:`...` 倍", "一个小十倍的": a reduction stated as a multiple.
RATIO = re.compile(
    r"(?:小|少|低|短|轻|慢|窄|降)了?\s*"
    r"(?::calc:`[^`]*`|[0-9][0-9.,]*|[一二两三四五六七八九十百千几]+)\s*倍"
)
# Inline markup, and a Chinese character touching it: rst then prints the raw text.
MARKUP = re.compile(
    r":[a-z]+(?::[a-z]+)?:`[^`]*`|``[^`]+``|(?<!\*)\*{1,2}[^*\s][^*]*?\*{1,2}(?!\*)"
)
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


# A {field} of a label or of a table's note or stamp; TeX groups (\\frac{a}{b}),
# roles and literals are not fields.
_FIELD = re.compile(r"(?<![\\\w{}])\{([A-Za-z_]\w*)\}(?!\})")
_NOT_TEXT = re.compile(r":[\w:+-]+:`[^`]*`|``[^`]*``")


def template_fields(text: str) -> list[str]:
    """The ``{fields}`` of a message, sorted (none for rst prose)."""
    return sorted(_FIELD.findall(_NOT_TEXT.sub("", text)))


def block_kind(text: str) -> str:
    """The kind of the first block rst reads in a message: ``paragraph``, or the
    list-like block it starts with (``bullet_list``, ``enumerated_list``, ...).

    Parsed with docutils when the text starts like a list (docutils comes with
    Sphinx); the message's roles are unknown to plain docutils and do not matter
    here: only the kind of the first block does.
    """
    if not BLOCK_START.match(text):
        return "paragraph"
    try:
        from docutils.core import publish_doctree
        from docutils.utils import Reporter
    except ImportError:  # Babel alone: the pattern is the answer
        return "list"
    tree = publish_doctree(
        text,
        settings_overrides={"report_level": Reporter.SEVERE_LEVEL + 1, "halt_level": 5},
    )
    blocks = [n for n in tree.children if n.tagname != "system_message"]
    return blocks[0].tagname if blocks else "paragraph"


def touches_markup(text: str) -> bool:
    """Whether a Chinese character sits right before or after inline markup."""
    for m in MARKUP.finditer(text):
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        if HAN.match(before) or HAN.match(after):
            return True
    return False


@dataclass(frozen=True)
class Problem:
    """One entry that needs the translator.

    Args:
        po: the catalogue, relative to the repository.
        po_line: the line of the entry's ``msgid`` in it.
        source: ``docs/<file>.rst:<line>`` the message comes from, or ``""``.
        state: a key of :data:`TODO` (``missing``, ``fuzzy``, ...).
        text: the English message.
    """

    po: str
    po_line: int
    source: str
    state: str
    text: str

    def line(self) -> str:
        """The problem as one line: where, what, the first words, what to do."""
        words = " ".join(self.text.split())
        words = words if len(words) <= 60 else words[:57] + "..."
        where = f"{self.po}:{self.po_line}" + (
            f" ({self.source})" if self.source else ""
        )
        return f"{where}: {self.state}: {words!r}: {TODO[self.state]}"


def _source(locations: list[tuple[str, int | None]], text: str = "") -> str:
    """``docs/<file>.rst:<line>``: the catalogue names the file (references carry
    no line numbers, so that an edit above a message does not change the
    catalogue); the line is where the message's first words are."""
    for path, line in locations:
        rel = path.replace("\\", "/")
        while rel.startswith("../"):
            rel = rel[3:]
        line = line or _line_of(ROOT / rel, text)
        return f"{rel}:{line}" if line else rel
    return ""


def _line_of(rst: pathlib.Path, text: str) -> int | None:
    """The line of ``rst`` where ``text`` starts (its first words), if found."""
    words = re.findall(r"\S+", text)[:6]
    if len(words) < 3 or not rst.is_file():  # a word or two is found anywhere
        return None
    source = rst.read_text(encoding="utf-8")
    m = re.search(r"\s+".join(map(re.escape, words)), source)
    return source.count("\n", 0, m.start()) + 1 if m else None


def problems(po: pathlib.Path, root: pathlib.Path = ROOT) -> Iterator[Problem]:
    """Every entry of one catalogue that a translator has to look at."""
    with po.open("rb") as f:
        catalog = read_po(f)
    name = str(po.relative_to(root)) if po.is_relative_to(root) else str(po)
    for msg in catalog:
        if not msg.id or not isinstance(msg.id, str):
            continue
        state = ""
        if not msg.string:
            state = "missing"
        elif msg.fuzzy:
            state = "fuzzy"
        elif sorted(ROLE.findall(msg.id)) != sorted(ROLE.findall(msg.string)):
            state = "roles"
        elif touches_markup(msg.string):
            state = "markup"
        elif (msg.context in languages.LABELS or template_fields(msg.id)) and sorted(
            template_fields(msg.string)
        ) != sorted(template_fields(msg.id)):
            state = "fields"
        elif block_kind(msg.string) != block_kind(msg.id):
            # A message is the text of one node (a paragraph, a title, a cell);
            # Sphinx parses the translation and drops it if it reads as a list. (A
            # figure's words are not parsed: "1. permute" may stay as it is.)
            state = "kind"
        elif RATIO.search(msg.string):
            state = "ratio"
        if state:
            yield Problem(
                name, msg.lineno, _source(msg.locations, msg.id), state, msg.id
            )
    for msg in catalog.obsolete.values():
        yield Problem(name, msg.lineno, "", "stale", str(msg.id))


def translations(docs: pathlib.Path = DOCS) -> list[str]:
    """The languages that have catalogues: all of ``languages.toml`` but the first."""
    return languages.translations(languages.load(docs))


def all_problems(lang: str, locale: pathlib.Path = LOCALE) -> list[Problem]:
    """The problems of every catalogue of ``lang``, catalogue by catalogue.

    Raises:
        ValueError: ``lang`` has no catalogues under ``locale``.
    """
    folder = locale / lang / "LC_MESSAGES"
    catalogues = sorted(folder.glob("*.po"))
    if not catalogues:
        raise ValueError(f"lang {lang!r} has no catalogues in {folder}")
    return [p for po in catalogues for p in problems(po)]


WIDTH = 88


def _words(text: str) -> str:
    return " ".join(text.split())


def prefill_from_obsolete(catalog: Catalog) -> int:
    """Start each new, untranslated entry from an obsolete one whose English it
    contains or is contained in; return how many were filled (marked fuzzy)."""
    old = {
        _words(m.id): m
        for m in catalog.obsolete.values()
        if isinstance(m.id, str) and m.string and len(_words(m.id)) >= 20
    }
    filled = 0
    for message in catalog:
        if not message.id or message.string or not isinstance(message.id, str):
            continue
        new = _words(message.id)
        match = next((m for text, m in old.items() if text in new or new in text), None)
        if match is None or len(new) < 20:
            continue
        message.string = match.string
        message.flags.add("fuzzy")
        message.previous_id = [match.id]
        del catalog.obsolete[match.id]
        old.pop(_words(match.id))
        filled += 1
    return filled


def with_previous(text: str, catalog: Catalog, width: int = WIDTH) -> str:
    """Insert each fuzzy entry's previous English as ``#| msgid`` lines.

    Babel writes a long previous msgid as one wrapped comment that GNU gettext
    rejects ("end-of-line within string"); here it is wrapped like the msgid
    itself, one ``#| "..."`` line per line.
    """
    for message in catalog:
        if not (message.id and message.fuzzy and message.previous_id):
            continue
        block = f"msgid {normalize(message.id, width=width)}\n"
        previous = normalize(message.previous_id[0], width=width).split("\n")
        lines = [f"#| msgid {previous[0]}", *(f"#| {line}" for line in previous[1:])]
        at = text.find(f"\n{block}") + 1
        if at > 0 and not text[:at].endswith(lines[-1] + "\n"):
            text = text[:at] + "\n".join(lines) + "\n" + text[at:]
    return text


def repair_previous(catalog: Catalog) -> None:
    """Read the ``#| msgid`` lines of fuzzy entries back as their previous English.

    Babel's reader keeps them as user comments (``| msgid "..."``, then one
    ``| "..."`` per continuation line); they are joined into ``previous_id`` (so that
    :func:`with_previous` writes them again) and dropped from the comments.
    """
    for message in catalog:
        lines = [c for c in message.user_comments if c.startswith(('| msgid "', '| "'))]
        if not lines:
            continue
        parts = [c.removeprefix("| msgid ").removeprefix("| ") for c in lines]
        message.previous_id = ["".join(unescape(p) for p in parts)]
        message.user_comments = [c for c in message.user_comments if c not in lines]


HEADER = """\
{name} ({lang}) translation of AI Infrastructure: see docs/translating.rst.
Copyright (C) 2026, the aiinfra authors
This file is distributed under the same license as the AI Infrastructure package."""


def fill_header(catalog: Catalog, lang: str) -> None:
    """The header says whose catalogue it is (no ``FIRST AUTHOR``, ``YEAR-MO-DA``
    or ``LL@li.org`` placeholders, which ``msgfmt --check`` warns about), and it is
    not fuzzy. The revision date is set when the catalogue's text changes."""
    name = languages.load(DOCS)[lang].name if lang in translations() else lang
    catalog.header_comment = "\n".join(
        f"# {line}" for line in HEADER.format(name=name, lang=lang).splitlines()
    )
    catalog.fuzzy = False
    catalog.last_translator = "The aiinfra translators"
    catalog.language_team = f"{name} ({lang})"
    catalog.msgid_bugs_address = ""


def render(catalog: Catalog) -> bytes:
    """The catalogue as written: 88 columns, references without line numbers,
    fuzzy entries with their previous English."""
    out = io.BytesIO()
    write_po(out, catalog, width=WIDTH, include_lineno=False)
    return with_previous(out.getvalue().decode("utf-8"), catalog).encode("utf-8")


def update_catalogue(template: Catalog, po: pathlib.Path, lang: str) -> str:
    """Merge ``template`` into the catalogue at ``po``; return what happened."""
    if po.exists():
        with open(po, "rb") as f:
            catalog = read_po(f, locale=lang)
        repair_previous(catalog)
        before = po.read_bytes()
    else:
        catalog, before = template, b""
        catalog.locale = lang
    if before:
        # Babel's update forgets the previous English of entries it keeps as they
        # are; a fuzzy entry that is still fuzzy keeps it.
        previous = {m.id: m.previous_id for m in catalog if m.id and m.previous_id}
        catalog.update(template, update_header_comment=False)
        for message in catalog:
            if message.fuzzy and not message.previous_id and message.id in previous:
                message.previous_id = previous[message.id]
    filled = prefill_from_obsolete(catalog)
    for message in catalog:
        # Babel guesses Python format strings from "%" and "{}" in the English; the
        # book's messages are rst, and the guess makes msgfmt --check fail. A label
        # (labels.po) and a table's note or stamp with {fields} are format strings:
        # msgfmt --check then checks their {fields}.
        message.flags -= {"python-format"}
        if message.context in languages.LABELS or template_fields(message.id):
            message.flags.add("python-brace-format")
        else:
            message.flags -= {"python-brace-format"}
    left = any(m.id and (not m.string or m.fuzzy) for m in catalog)
    if not left:
        catalog.obsolete.clear()  # nothing can use them any more
    fill_header(catalog, lang)
    po.parent.mkdir(parents=True, exist_ok=True)
    text = render(catalog)
    if text == before:
        return "unchanged"
    catalog.revision_date = datetime.datetime.now(datetime.UTC)
    text = render(catalog)
    po.write_bytes(text)
    return (
        f"updated ({filled} prefilled from obsolete entries)" if before else "created"
    )


def update(pot_dir: pathlib.Path, lang: str, locale: pathlib.Path = LOCALE) -> None:
    """Merge every ``.pot`` of ``pot_dir`` into ``lang``'s catalogues.

    Raises:
        ValueError: ``pot_dir`` holds no ``.pot`` file.
    """
    templates = sorted(pot_dir.glob("*.pot"))
    if not templates:
        raise ValueError(f"--pot {pot_dir} holds no .pot files (run the gettext build)")
    for pot in templates:
        with open(pot, "rb") as f:
            template = read_po(f)
        po = locale / lang / "LC_MESSAGES" / f"{pot.stem}.po"
        print(f"{lang}/{po.name}: {update_catalogue(template, po, lang)}")


def main(argv: list[str] | None = None) -> int:
    """``check`` (exit 1 on any problem), ``todo`` (exit 0) or ``update``."""
    parser = argparse.ArgumentParser(prog="tools/catalogues.py", description=__doc__)
    parser.add_argument("command", choices=("check", "todo", "update"))
    parser.add_argument(
        "--lang", nargs="+", help="these languages (default: every translation)"
    )
    parser.add_argument("--pot", type=pathlib.Path, help="update: the .pot folder")
    args = parser.parse_args(argv)
    known = translations()
    for lang in args.lang or []:
        if lang not in known:
            parser.error(
                f"--lang {lang!r} is not a translation of docs/languages.toml "
                f"(it has {', '.join(known) or 'none'}); add a table for it there"
            )
    langs = args.lang or known
    if args.command == "update":
        if args.pot is None:
            parser.error("update needs --pot (the gettext build's folder)")
        try:
            for lang in langs:
                update(args.pot, lang)
        except ValueError as exc:
            parser.error(str(exc))
        return 0
    found_any = False
    for lang in langs:
        try:
            found = all_problems(lang)
        except ValueError as exc:
            parser.error(f"{exc} (run nox -s translate to create them)")
        chapter = None
        for problem in found:
            if args.command == "todo" and problem.po != chapter:
                chapter = problem.po
                print(f"\n{pathlib.Path(chapter).stem} ({lang}):")
            print(problem.line())
        counts = {s: sum(p.state == s for p in found) for s in TODO}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        print(f"{lang}: {summary}" if found else f"{lang}: nothing to do")
        found_any = found_any or bool(found)
    return 1 if found_any and args.command == "check" else 0


if __name__ == "__main__":
    sys.exit(main())
