"""The Chinese edition is complete: every message of the sources is translated."""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from .conftest import DOCS

CATALOGUES = DOCS / "locale" / "zh_CN" / "LC_MESSAGES"


def _read(path):
    with path.open("rb") as f:
        return read_po(f)


@pytest.fixture(scope="module")
def templates(book_tool, tmp_path_factory):
    """Fresh .pot templates extracted from the current sources."""
    return book_tool.gettext(tmp_path_factory.mktemp("gettext"))


def test_no_catalogue_has_untranslated_or_fuzzy_entries():
    problems = []
    for po in sorted(CATALOGUES.glob("*.po")):
        for msg in _read(po):
            if not msg.id:
                continue
            if msg.fuzzy:
                problems.append(f"{po.name}: fuzzy: {msg.id!r:.70}")
            elif not msg.string:
                problems.append(f"{po.name}: untranslated: {msg.id!r:.70}")
    assert not problems, "\n".join(problems[:40])


def test_every_message_of_the_sources_has_a_translation(templates):
    """Catches sources changed without `nox -s translate` (the zh page would fall
    back to English silently)."""
    missing = []
    for pot in sorted(templates.glob("*.pot")):
        po = CATALOGUES / f"{pot.stem}.po"
        assert po.is_file(), (
            f"no catalogue {po.name} for {pot.name}: run nox -s translate"
        )
        translated = {m.id: m.string for m in _read(po) if m.id and not m.fuzzy}
        for msg in _read(pot):
            if msg.id and not translated.get(msg.id):
                missing.append(f"{po.name}: {msg.id!r:.70}")
    assert not missing, "\n".join(missing[:40])


def test_translations_keep_roles_and_substitutions():
    """A translator must copy :calc:/:term:/:cite: roles verbatim in target and form."""
    role = re.compile(r":(calc|cite:p|cite:t|math|booklink):`[^`]*`")
    bad = []
    for po in sorted(CATALOGUES.glob("*.po")):
        for msg in _read(po):
            if not msg.id or not msg.string:
                continue
            want = sorted(
                m.group(0)
                for m in role.finditer(msg.id)
                if not m.group(0).startswith(":booklink:")
            )
            got = sorted(
                m.group(0)
                for m in role.finditer(msg.string)
                if not m.group(0).startswith(":booklink:")
            )
            if want != got:
                bad.append(f"{po.name}: {msg.id!r:.60} -> roles {got} != {want}")
    assert not bad, "\n".join(bad[:20])


def test_no_word_of_a_chinese_figure_stays_english_when_it_is_translated(site):
    """Every text a zh figure draws (titles of sub-figures included) that the
    catalogues translate is drawn translated: a word label left in English here is
    one the figure's drawing code did not hand to the translation."""
    from aiinfra_book.compute import is_words

    # A word some chapter keeps as it is ("head", a layer's name in one chapter, is
    # 头 in another) is not counted: the SVG does not say which chapter drew it.
    translated, kept = set(), set()
    for po in CATALOGUES.glob("*.po"):
        for msg in _read(po):
            if msg.id and isinstance(msg.id, str) and msg.string:
                (kept if msg.string == msg.id else translated).add(msg.id)
    translated -= kept
    figures = sorted((DOCS.parent / "build" / "figures" / "zh_CN").glob("*.svg"))
    assert len(figures) > 100
    left = sorted(
        {
            (svg.name, text)
            for svg in figures
            for text in re.findall(r"<!-- (.*?) -->", svg.read_text(encoding="utf-8"))
            if is_words(text) and text in translated
        }
    )
    assert not left, left[:20]
