"""The lecturer's file ``slides/decks.toml``: the course the chapter decks form.

Standard library only (``tools/book.py`` checks the file before any build starts).
A lecturer edits it instead of passing flags::

    [course]
    title = "CS 742: AI infrastructure"   # the title slides' course line
    lecturer = "Dr. Li"
    date = "Autumn 2026"
    chapters = ["overview", "hardware", "training"]   # the course, in its order
    minutes_per_lecture = 90    # split each deck into lectures of at most this

    [decks.training]            # one deck's own settings
    minutes_per_lecture = 75
    split_before = ["zero", "tensor_parallel"]        # pages that open a lecture

Every key is optional; an empty file (or none) gives one deck per chapter, in the
book's order, as before. With ``minutes_per_lecture``, a chapter whose deck runs
longer is cut at page boundaries into lectures (:func:`split`), each with its own
title slide, agenda, recap, questions and references; the deck list shows the
course lecture by lecture. A bad entry is an error that names the key.
"""

from __future__ import annotations

import pathlib
import tomllib
from dataclasses import dataclass, field

FILE = pathlib.Path("slides") / "decks.toml"
COURSE_KEYS = {
    "title": str,
    "lecturer": str,
    "date": str,
    "chapters": list,
    "minutes_per_lecture": int,
}
DECK_KEYS = {"minutes_per_lecture": int, "split_before": list}
# A lecture shorter than this holds hardly more than its own title and recap.
MIN_LECTURE_MINUTES = 10
# What every lecture adds to its pages: its title, agenda, recap and references.
LECTURE_OVERHEAD_MIN = 2.0


@dataclass(frozen=True)
class Deck:
    """One chapter deck's settings (a ``[decks.<chapter>]`` table)."""

    minutes_per_lecture: int = 0
    split_before: tuple[str, ...] = ()


@dataclass(frozen=True)
class Course:
    """What ``slides/decks.toml`` says (defaults: one deck per chapter)."""

    title: str = ""
    lecturer: str = ""
    date: str = ""
    chapters: tuple[str, ...] = ()
    minutes_per_lecture: int = 0
    decks: dict[str, Deck] = field(default_factory=dict)

    def minutes(self, chapter: str) -> int:
        """Minutes per lecture of ``chapter``'s deck (0: one deck, not split)."""
        own = self.decks.get(chapter)
        if own is not None and own.minutes_per_lecture:
            return own.minutes_per_lecture
        return self.minutes_per_lecture

    def splits(self) -> bool:
        """Whether any deck is cut into lectures."""
        return bool(self.minutes_per_lecture) or any(
            d.minutes_per_lecture for d in self.decks.values()
        )

    def order(self, book_chapters: list[str]) -> list[str]:
        """The chapters of the course, in its order (default: the book's)."""
        return list(self.chapters) or list(book_chapters)

    def as_dict(self) -> dict:
        """Plain data (a Sphinx configuration value must pickle and compare)."""
        return {
            "title": self.title,
            "lecturer": self.lecturer,
            "date": self.date,
            "chapters": list(self.chapters),
            "minutes_per_lecture": self.minutes_per_lecture,
            "decks": {
                c: {
                    "minutes_per_lecture": d.minutes_per_lecture,
                    "split_before": list(d.split_before),
                }
                for c, d in sorted(self.decks.items())
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> Course:
        """The inverse of :meth:`as_dict`."""
        decks = {
            c: Deck(d["minutes_per_lecture"], tuple(d["split_before"]))
            for c, d in data.get("decks", {}).items()
        }
        return cls(
            data.get("title", ""),
            data.get("lecturer", ""),
            data.get("date", ""),
            tuple(data.get("chapters", ())),
            data.get("minutes_per_lecture", 0),
            decks,
        )


def _check(where: str, table: dict, keys: dict[str, type]) -> None:
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise ValueError(
            f"{where}: unknown key {unknown[0]!r}; the keys are {', '.join(keys)}"
        )
    for key, kind in keys.items():
        if key in table and (
            not isinstance(table[key], kind) or isinstance(table[key], bool)
        ):
            raise ValueError(
                f"{where}: '{key}' must be {kind.__name__}, got {table[key]!r}"
            )
    if "minutes_per_lecture" in table:
        m = table["minutes_per_lecture"]
        if m != 0 and m < MIN_LECTURE_MINUTES:
            raise ValueError(
                f"{where}: 'minutes_per_lecture' must be 0 (one deck per chapter) or "
                f">= {MIN_LECTURE_MINUTES}, got {m}"
            )
    for key in ("title", "lecturer", "date"):
        if any(ord(c) < 32 for c in table.get(key, "")):
            raise ValueError(f"{where}: '{key}' must be one line, got {table[key]!r}")


def load(
    path: pathlib.Path, chapters: list[str], pages: dict[str, list[str]] | None = None
) -> Course:
    """Read and check the course file; a missing file is the default course.

    Args:
        path: ``slides/decks.toml``.
        chapters: the book's chapters (``docs/index.rst``'s ``chapters`` toctree).
        pages: each chapter's pages (its toctree), to check ``split_before``.

    Raises:
        ValueError: a key that does not exist, a value of the wrong type, a chapter
            the book lacks or named twice, minutes below the minimum, a
            ``split_before`` page the chapter lacks; the message names the key.
    """
    if not path.is_file():
        return Course()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"course", "decks"})
    if unknown:
        raise ValueError(
            f"{path}: unknown table [{unknown[0]}]; the tables are [course] and "
            "[decks.<chapter>]"
        )
    course = data.get("course", {})
    if not isinstance(course, dict):
        raise ValueError(f"{path}: 'course' must be a table [course]")
    _check(f"{path}: [course]", course, COURSE_KEYS)
    listed = course.get("chapters", [])
    for c in listed:
        if c not in chapters:
            raise ValueError(
                f"{path}: [course] 'chapters' names {c!r}, which is not a chapter; "
                f"the chapters are {', '.join(chapters)}"
            )
    if len(set(listed)) != len(listed):
        raise ValueError(f"{path}: [course] 'chapters' names a chapter twice")
    decks = {}
    tables = data.get("decks", {})
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: 'decks' must hold tables [decks.<chapter>]")
    for chapter, table in tables.items():
        where = f"{path}: [decks.{chapter}]"
        if chapter not in chapters:
            raise ValueError(
                f"{where}: {chapter!r} is not a chapter; the chapters are "
                f"{', '.join(chapters)}"
            )
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table of settings")
        _check(where, table, DECK_KEYS)
        split_before = table.get("split_before", [])
        known = (pages or {}).get(chapter)
        for page in split_before:
            if not isinstance(page, str) or (known is not None and page not in known):
                raise ValueError(
                    f"{where}: 'split_before' names {page!r}, which is not a page of "
                    f"the chapter; its pages are {', '.join(known or [])}"
                )
        decks[chapter] = Deck(table.get("minutes_per_lecture", 0), tuple(split_before))
    return Course(
        course.get("title", "").strip(),
        course.get("lecturer", "").strip(),
        course.get("date", "").strip(),
        tuple(listed),
        course.get("minutes_per_lecture", 0),
        decks,
    )


def _greedy(weights: list[float], cap: float) -> list[list[int]]:
    """Consecutive groups, each filled while its total stays within ``cap`` (an
    item larger than ``cap`` sits alone)."""
    groups: list[list[int]] = []
    total = 0.0
    for i, w in enumerate(weights):
        if groups and total + w <= cap:
            groups[-1].append(i)
            total += w
        else:
            groups.append([i])
            total = w
    return groups


def split(
    minutes: list[float],
    budget: float,
    overhead: float = LECTURE_OVERHEAD_MIN,
    breaks: frozenset[int] = frozenset(),
) -> list[list[int]]:
    """Cut consecutive pages into as few lectures as fit, as even as possible.

    Each lecture's pages plus ``overhead`` stay within ``budget`` minutes (a page
    longer than that on its own is a lecture by itself). Among the cuts with the
    fewest lectures, the one whose longest lecture is shortest is chosen, so the
    lectures come out even rather than full, full, short. A page in ``breaks``
    always opens a lecture.

    Args:
        minutes: each page's minutes, in deck order.
        budget: minutes per lecture.
        overhead: minutes every lecture adds (title, agenda, recap).
        breaks: indices of pages that start a lecture.

    Returns:
        The lectures, each a list of page indices, in order.

    Raises:
        ValueError: ``budget`` is not larger than ``overhead``, or a minute count
            is negative.
    """
    if budget <= overhead:
        raise ValueError(f"budget must be > overhead ({overhead}), got {budget}")
    if any(m < 0 for m in minutes):
        raise ValueError(f"minutes must be >= 0, got {minutes}")
    cap = budget - overhead
    # Forced breaks cut the pages into runs; each run is split on its own.
    starts = sorted({0, *(b for b in breaks if 0 < b < len(minutes))})
    runs = [
        list(range(a, b))
        for a, b in zip(starts, [*starts[1:], len(minutes)], strict=True)
        if a < b
    ]
    lectures = []
    for run in runs:
        weights = [minutes[i] for i in run]
        fewest = len(_greedy(weights, cap))
        # The smallest cap that still needs no more lectures (bisection between the
        # longest page and the budget); a page over the budget keeps the budget.
        low, high = max(weights), cap
        while high - low > 0.01 and low < high:
            mid = (low + high) / 2
            if len(_greedy(weights, mid)) <= fewest:
                high = mid
            else:
                low = mid
        groups = _greedy(weights, high)
        lectures += [[run[i] for i in g] for g in groups]
    return lectures
