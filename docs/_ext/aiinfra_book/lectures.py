"""A chapter's deck cut into lectures that fit the slot of ``slides/decks.toml``.

With ``minutes_per_lecture`` set (:mod:`.decks`), a chapter whose deck runs longer
is cut at page boundaries (:func:`.decks.split`, on each page's suggested minutes)
into lectures written beside the chapter's deck, ``<chapter>/lecture-<k>.html``.
Each is built from the same sources by the same transforms, restricted to its pages
(:func:`lecture_of`): a title slide (the course, "Lecture N", the chapter's title
and its part), an agenda slide listing its pages, those pages, a recap of their key
points, the questions about them and the works they cite. Lecture 1 also keeps the
chapter's learning objectives and the index page's own sections.

A question belongs to the lecture of the last page it draws on: the pages its
``:doc:`` links name and the page modules its ``:calc:`` values come from; a
question that names none goes to the last lecture.
"""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.util.osutil import relative_uri

from .decks import LECTURE_OVERHEAD_MIN, Course, split
from .questions import aiinfra_question

_CALC = re.compile(r":calc:`\s*(aiinfra\.book\.[\w.]+):")


@dataclass(frozen=True)
class Lecture:
    """One lecture of a chapter's deck.

    Args:
        chapter: the chapter (its folder).
        k: this lecture's place in the chapter, from 1.
        n: how many lectures the chapter has.
        number: its place in the course, from 1.
        pages: the docnames of its pages, in deck order.
        questions: the numbers of the chapter's questions it asks.
        slides: its slides, estimated from the chapter's deck.
        minutes: its suggested minutes.
    """

    chapter: str
    k: int
    n: int
    number: int
    pages: tuple[str, ...]
    questions: tuple[int, ...]
    slides: int
    minutes: float

    @property
    def pagename(self) -> str:
        """Where the lecture is written, beside the chapter's deck."""
        return f"{self.chapter}/lecture-{self.k}"


def course(config: Any) -> Course:
    """The course of this build (``aiinfra_course``, from ``slides/decks.toml``)."""
    return Course.from_dict(config.aiinfra_course or {})


def question_pages(env: BuildEnvironment, questions_doc: str) -> dict[int, set[str]]:
    """The pages each question of a questions page draws on, by question number."""
    found: dict[int, set[str]] = {}
    chapter = questions_doc.split("/")[0]
    tree = env.get_doctree(questions_doc)
    for q in tree.findall(aiinfra_question):
        pages: set[str] = set()
        for xref in q.findall(addnodes.pending_xref):
            if xref.get("reftype") == "doc":
                target = xref["reftarget"]
                doc = (
                    target.lstrip("/")
                    if target.startswith("/")
                    else (f"{chapter}/{target}")
                )
                pages.add(doc)
        for node in q.findall(nodes.inline):
            m = _CALC.match(node.rawsource or "")
            if m:
                parts = m.group(1).split(".")  # aiinfra.book.<chapter>.<page>
                if len(parts) >= 4:
                    pages.add(f"{parts[2]}/{parts[3]}")
        found[q["number"]] = pages
    return found


def _rows(app: Sphinx, index: str) -> list[tuple[str | None, int, float, int]]:
    """``(page or None, slides, minutes, questions)`` per top-level section of the
    chapter's whole deck (``None``: the title slide, the index page's own sections
    and the slides the build makes)."""
    from .slides import deck_sections

    return [(p, n, m, q) for p, _, n, m, q in deck_sections(app, index)]


def plan(app: Sphinx, index: str, first_number: int = 1) -> list[Lecture]:
    """The lectures of a chapter's deck (one, the whole deck, when it fits).

    Args:
        app: the revealjs build.
        index: the chapter's index docname.
        first_number: the course's number of its first lecture.
    """
    chapter = index.split("/")[0]
    cfg = course(app.config)
    budget = cfg.minutes(chapter)
    rows = _rows(app, index)
    toc = [p for p in app.env.toctree_includes.get(index, []) if p in app.env.all_docs]
    questions_doc = next(
        (p for p in toc if any(app.env.get_doctree(p).findall(aiinfra_question))),
        None,
    )
    pages = [p for p in toc if p != questions_doc]
    per_page = {p: (0, 0.0) for p in pages}
    # The index page's own sections (objectives, how to run the code) come before
    # the first page and open lecture 1; the title slide and the slides the build
    # makes (recap, references) are every lecture's overhead.
    intro_slides, intro_minutes, q_slides, q_minutes, q_count = 0, 0.0, 0, 0.0, 0
    seen_page = False
    for page, slides, minutes, questions in rows[1:]:
        if page in per_page:
            per_page[page] = (slides, minutes)
            seen_page = True
        elif page is not None and page == questions_doc:
            q_slides, q_minutes, q_count = slides, minutes, max(1, questions)
        elif page is None and not seen_page:
            intro_slides, intro_minutes = intro_slides + slides, intro_minutes + minutes
    asked = question_pages(app.env, questions_doc) if questions_doc else {}
    if not budget or not pages:
        one = Lecture(
            chapter,
            1,
            1,
            first_number,
            tuple(pages),
            tuple(sorted(asked)),
            sum(r[1] for r in rows),
            sum(r[2] for r in rows),
        )
        return [one]
    # Each question's share of the questions page goes with the page it is about.
    share = q_minutes / q_count if q_count else 0.0
    last = {
        n: max((pages.index(p) for p in ps if p in pages), default=len(pages) - 1)
        for n, ps in asked.items()
    }
    weights = [
        per_page[p][1] + share * sum(1 for i in last.values() if i == j)
        for j, p in enumerate(pages)
    ]
    weights[0] += intro_minutes
    own = cfg.decks.get(chapter)
    before = own.split_before if own is not None else ()
    breaks = frozenset(
        pages.index(f"{chapter}/{p}") for p in before if f"{chapter}/{p}" in pages
    )
    groups = split(weights, budget, LECTURE_OVERHEAD_MIN, breaks)
    lectures = []
    for k, group in enumerate(groups, 1):
        chosen = tuple(pages[i] for i in group)
        qs = tuple(sorted(n for n, i in last.items() if i in group))
        slides = sum(per_page[p][0] for p in chosen) + 3  # title, agenda, recap
        slides += (intro_slides if k == 1 else 0) + (
            round(q_slides * len(qs) / q_count) if q_count else 0
        )
        minutes = sum(weights[i] for i in group) + LECTURE_OVERHEAD_MIN
        lectures.append(
            Lecture(
                chapter,
                k,
                len(groups),
                first_number + k - 1,
                chosen,
                qs,
                slides,
                minutes,
            )
        )
    return lectures


def course_plan(app: Sphinx, indexes: list[str]) -> dict[str, list[Lecture]]:
    """Every deck of the course, in its order, with its lectures numbered across."""
    cfg = course(app.config)
    by_chapter = {i.split("/")[0]: i for i in indexes}
    out: dict[str, list[Lecture]] = {}
    number = 1
    for chapter in cfg.order(list(by_chapter)):
        lectures = plan(app, by_chapter[chapter], number)
        out[by_chapter[chapter]] = lectures
        number += len(lectures)
    return out


def lecture_of(env: BuildEnvironment, docname: str) -> Lecture | None:
    """The lecture being assembled from ``docname``'s deck, if any."""
    lecture = getattr(env, "_aiinfra_lecture", None)
    if lecture is not None and f"{lecture.chapter}/index" == docname:
        return lecture
    return None


def keep_questions(section: nodes.section, numbers: tuple[int, ...]) -> bool:
    """Drop the questions of a questions page not in ``numbers``; whether any stay."""
    kept = 0
    for q in list(section.findall(aiinfra_question)):
        if q["number"] in numbers:
            kept += 1
        else:
            q.parent.remove(q)
    return kept > 0


def write_lectures(app: Sphinx) -> list:
    """``html-collect-pages`` of the revealjs build: write each lecture of every
    deck rewritten in this build (or missing); remove lecture files that no longer
    belong to a plan (a deck that now fits, a shorter split)."""
    if app.builder.name != "revealjs":
        return []
    from .slides import chapter_indexes, decks_reread

    plans = (
        course_plan(app, chapter_indexes(app.env))
        if course(app.config).splits()
        else {}
    )
    rewritten = set(decks_reread(app.env))
    for index, lectures in plans.items():
        if len(lectures) < 2:
            continue
        out = pathlib.Path(app.outdir) / index.split("/")[0]
        missing = any(not (out / f"lecture-{x.k}.html").exists() for x in lectures)
        if index in rewritten or missing:
            for lecture in lectures:
                _write(app, index, lecture)
    _remove_stale(app, plans)
    return []


def _write(app: Sphinx, index: str, lecture: Lecture) -> None:
    builder, env = app.builder, app.env
    env._aiinfra_lecture = lecture
    try:
        doctree = env.get_and_resolve_doctree(index, builder)
        doctree.settings = builder.docsettings
        builder.secnumbers, builder.fignumbers = {}, {}
        builder.imgpath = relative_uri(builder.get_target_uri(index), "_images")
        builder.current_docname = index
        visitor = builder.create_translator(doctree, builder)
        doctree.walkabout(visitor)
        body = "".join(visitor.fragment)
        ctx = builder.get_doc_context(index, body, "".join(visitor.meta[2:]))
        ctx["has_maths_elements"] = getattr(visitor, "_has_maths_elements", False)
        builder.handle_page(lecture.pagename, ctx, event_arg=doctree)
    finally:
        env._aiinfra_lecture = None


def _remove_stale(app: Sphinx, plans: dict[str, list[Lecture]]) -> None:
    """Lecture files no plan of this build writes (a chapter now one deck)."""
    if app.builder.name != "revealjs":
        return
    keep = {
        lecture.pagename
        for lectures in plans.values()
        if len(lectures) > 1
        for lecture in lectures
    }
    for path in pathlib.Path(app.outdir).glob("*/lecture-*.html"):
        name = f"{path.parent.name}/{path.stem}"
        if name not in keep:
            path.unlink()
