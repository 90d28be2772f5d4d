"""The translator's loop, run as the Translating page and CONTRIBUTING.md tell it.

On the tiny book of :mod:`.minibook` (with its own copy of ``tools/``), each step
is the documented command, and each step's output is what a translator reads:

1. ``python tools/book.py translate``: the to-do list names each entry's ``.po``
   line, rst file and line, and state; the words the build writes get their own
   catalogue (``labels.po``).
2. The translator fills every entry; ``python tools/catalogues.py check`` passes.
3. ``python tools/book.py build --lang zh_CN --builder html``: the Chinese shows.
4. The English changes (a sentence rewritten, a paragraph shortened) and a new
   language is started (one table in ``docs/languages.toml``); ``translate`` marks
   the rewritten entry fuzzy with its previous English, pre-fills the shortened one
   and creates the new language's catalogues.
5. The translator fixes the two entries; the check passes again; the incremental
   rebuild of the Chinese edition shows the new text.
6. The new language builds, unpublished: its pages link to the published editions,
   which do not link to it, and the site's front door does not send anyone there.

Each step's seconds are printed (``pytest -s``) and bounded.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import time

from babel.messages.pofile import read_po, write_po

from .minibook import lay_out

STEPS: dict[str, float] = {}


def run(book: pathlib.Path, step: str, *args: str, ok: bool = True) -> str:
    """Run one documented command in the tiny book; time it; return its output."""
    env = {**os.environ, "MPLBACKEND": "Agg"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=book,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    STEPS[step] = time.perf_counter() - t0
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) is ok, f"{' '.join(args)} -> {proc.returncode}\n{out}"
    return out


def fill(po: pathlib.Path, translate) -> int:  # noqa: ANN001 - a function of the English
    """Do what a translator does in an editor: write each missing or fuzzy entry
    (``translate(english) -> chinese``) and delete its fuzzy flag; return how many."""
    with po.open("rb") as f:
        catalog = read_po(f)
    done = 0
    for message in catalog:
        if message.id and (not message.string or message.fuzzy):
            message.string = translate(message.id)
            message.flags.discard("fuzzy")
            message.previous_id = []
            done += 1
    with po.open("wb") as f:
        write_po(f, catalog, width=88, include_lineno=False)
    return done


def zh(english: str) -> str:
    """A stand-in translation that keeps roles and {fields} as they are."""
    return f"【译】{english}"


def test_a_translator_does_the_loop_from_the_docs_alone(tmp_path):
    book = lay_out(tmp_path / "book", tools=True, labels=False)
    docs = book / "docs"
    catalogues = docs / "locale" / "zh_CN" / "LC_MESSAGES"

    # The chapter's first paragraph has two sentences (step 4 removes one).
    index = docs / "newchapter" / "index.rst"
    index.write_text(
        index.read_text(encoding="utf-8").replace(
            "What the chapter is about.",
            "What the chapter is about, and why a reader needs it before the next "
            "one. It starts from the simplest case.",
        ),
        encoding="utf-8",
    )

    # 1. Refresh the catalogues: what is left, entry by entry.
    out = run(book, "translate", "tools/book.py", "translate")
    assert "zh_CN/newchapter.po: updated" in out and "zh_CN/labels.po: created" in out
    todo = re.findall(r"^(\S+\.po):(\d+) \((\S+?):(\d+)\): (\w+): '(.*?)'", out, re.M)
    first = [t for t in todo if t[5].startswith("Prose of first")]
    assert first, out
    po, po_line, rst, rst_line, state, _ = first[0]
    assert state == "missing" and rst == "docs/newchapter/first.rst"
    lines = (book / po).read_text(encoding="utf-8").splitlines()
    assert lines[int(po_line) - 1].startswith("msgid")
    rst_lines = (book / rst).read_text(encoding="utf-8").splitlines()
    assert rst_lines[int(rst_line) - 1].startswith("Prose of first")
    assert "Chapter {n}" in out  # a label is on the list too
    run(book, "check (before)", "tools/catalogues.py", "check", ok=False)

    # 2. Translate everything; the check passes.
    filled = sum(fill(po, zh) for po in sorted(catalogues.glob("*.po")))
    assert filled > 20
    out = run(book, "check", "tools/catalogues.py", "check")
    assert out.strip().endswith("zh_CN: nothing to do")

    # 3. Build the Chinese edition.
    out = run(book, "build zh_CN (first)", *_build("zh_CN"))
    page = book / "build" / "site" / "zh_CN" / "newchapter" / "first.html"
    html = page.read_text(encoding="utf-8")
    assert "【译】Prose of first" in html
    deck_button = re.search(
        r'class="btn[^"]*deck-link[^"]*"[^>]*>(.*?)</a>', html, re.S
    )
    assert deck_button and "【译】Slides" in deck_button.group(1)

    # 4. The English changes; a new language is started.
    first_rst = docs / "newchapter" / "first.rst"
    first_rst.write_text(
        first_rst.read_text(encoding="utf-8").replace(
            "Prose of first, which moves into the speaker notes.",
            "Prose of first, which now moves into the speaker notes.",
        ),
        encoding="utf-8",
    )
    index.write_text(
        index.read_text(encoding="utf-8").replace(
            " It starts from the simplest case.", ""
        ),
        encoding="utf-8",
    )
    with (docs / "languages.toml").open("a", encoding="utf-8") as f:
        f.write('\n[ja]\nname = "日本語"\ntitle = "AI インフラ"\npublished = false\n')
    out = run(book, "translate (edit + new language)", "tools/book.py", "translate")
    assert "ja/newchapter.po: created" in out and "ja/labels.po: created" in out
    text = (catalogues / "newchapter.po").read_text(encoding="utf-8")
    # The rewritten sentence: fuzzy, with the English it was translated from.
    assert re.search(
        r'#, fuzzy\n#\| msgid "Prose of first, which moves into the speaker notes."\n'
        r'msgid "Prose of first, which now moves',
        text,
    ), text
    # The shortened paragraph: its old translation, marked fuzzy, to adjust.
    shortened = _entry(catalogues / "newchapter.po", "What the chapter is about")
    assert shortened.fuzzy and shortened.string.startswith("【译】What the chapter")
    states = re.findall(r"newchapter\.po:\d+ \(\S+\): (\w+):", out)
    assert states.count("fuzzy") == 2, out
    assert "ja: " in out and re.search(r"ja: \d+ missing", out)

    # 5. Fix the two entries; check; the incremental rebuild shows them.
    assert fill(catalogues / "newchapter.po", zh) == 2
    run(book, "check (after fix)", "tools/catalogues.py", "check", "--lang", "zh_CN")
    run(book, "build zh_CN (incremental)", *_build("zh_CN"))
    html = page.read_text(encoding="utf-8")
    assert "【译】Prose of first, which now moves" in html
    assert STEPS["build zh_CN (incremental)"] < 30

    # 6. The new language builds, unpublished.
    out = run(
        book, "check ja", "tools/catalogues.py", "check", "--lang", "ja", ok=False
    )
    assert re.search(r"ja: \d+ missing", out)
    run(book, "build ja", *_build("ja"))
    ja = (book / "build" / "site" / "ja" / "newchapter" / "first.html").read_text(
        encoding="utf-8"
    )
    assert (
        '<html lang="ja"' in ja and "Prose of first" in ja
    )  # English until translated
    switch = re.findall(r'class="btn btn-sm aiinfra-lang-switch" href="([^"]+)"', ja)
    assert switch == [
        "../../en/newchapter/first.html",
        "../../zh_CN/newchapter/first.html",
    ]
    assert "/ja/" not in page.read_text(encoding="utf-8")  # zh_CN does not link to it
    probe = (
        "import sys; sys.path.insert(0, 'tools'); import book, json; "
        "print(json.dumps([book.LANGS, book.redirect()]))"
    )
    published, front_door = json.loads(run(book, "front door", "-c", probe))
    assert published == ["en", "zh_CN"] and "ja/" not in front_door
    print("\ntranslator loop, seconds per step:")
    for step, seconds in STEPS.items():
        print(f"  {step:34s} {seconds:5.1f}")


def _build(lang: str) -> tuple[str, ...]:
    return ("tools/book.py", "build", "--lang", lang, "--builder", "html")


def _entry(po: pathlib.Path, start: str):  # noqa: ANN202 - a Babel Message
    with po.open("rb") as f:
        return next(m for m in read_po(f) if m.id and m.id.startswith(start))
