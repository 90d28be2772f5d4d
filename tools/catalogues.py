"""What a translator has left to do, read from the catalogues alone.

    python tools/catalogues.py check   # every problem; exit status 1 if there is one
    python tools/catalogues.py todo    # the same list, per chapter; exit status 0

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
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from babel.messages.pofile import read_po

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCALE = ROOT / "docs" / "locale"
ROLE = re.compile(r":(?:calc|cite:p|cite:t|math):`[^`]*`")
TODO = {
    "missing": "write the translation",
    "fuzzy": "compare with the English, fix it, delete the '#, fuzzy' line",
    "stale": "reuse the old translation where it fits, then delete the entry",
    "roles": "copy every :calc:, :cite: and :math: role of the English verbatim",
}


@dataclass(frozen=True)
class Problem:
    """One entry that needs the translator.

    Args:
        po: the catalogue, relative to the repository.
        po_line: the line of the entry's ``msgid`` in it.
        source: ``docs/<file>.rst:<line>`` the message comes from, or ``""``.
        state: ``missing``, ``fuzzy``, ``stale`` or ``roles``.
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


def _source(locations: list[tuple[str, int | None]]) -> str:
    for path, line in locations:
        rel = path.replace("\\", "/")
        while rel.startswith("../"):
            rel = rel[3:]
        return f"{rel}:{line}" if line else rel
    return ""


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
        if state:
            yield Problem(name, msg.lineno, _source(msg.locations), state, msg.id)
    for msg in catalog.obsolete.values():
        yield Problem(name, msg.lineno, "", "stale", str(msg.id))


def all_problems(lang: str = "zh_CN", locale: pathlib.Path = LOCALE) -> list[Problem]:
    """The problems of every catalogue of ``lang``, catalogue by catalogue.

    Raises:
        ValueError: ``lang`` has no catalogues under ``locale``.
    """
    folder = locale / lang / "LC_MESSAGES"
    catalogues = sorted(folder.glob("*.po"))
    if not catalogues:
        raise ValueError(f"lang {lang!r} has no catalogues in {folder}")
    return [p for po in catalogues for p in problems(po)]


def main(argv: list[str] | None = None) -> int:
    """``check`` (exit 1 on any problem) or ``todo`` (exit 0), per catalogue."""
    parser = argparse.ArgumentParser(prog="tools/catalogues.py", description=__doc__)
    parser.add_argument("command", choices=("check", "todo"))
    parser.add_argument("--lang", default="zh_CN", help="catalogues of this language")
    args = parser.parse_args(argv)
    try:
        found = all_problems(args.lang)
    except ValueError as exc:
        parser.error(str(exc))
    chapter = None
    for problem in found:
        if args.command == "todo" and problem.po != chapter:
            chapter = problem.po
            print(f"\n{pathlib.Path(chapter).stem}:")
        print(problem.line())
    counts = {s: sum(p.state == s for p in found) for s in TODO}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    print(f"{args.lang}: {summary}" if found else f"{args.lang}: nothing to do")
    return 1 if found and args.command == "check" else 0


if __name__ == "__main__":
    sys.exit(main())
