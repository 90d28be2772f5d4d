"""The slide decks: the book's own pages, laid out for reveal.js.

- A chapter's deck is its ``index`` page built by the revealjs builder, with the
  chapter's toctree replaced by the sections it lists (:class:`AssembleDeck`): no
  per-chapter deck file exists, and a section added to the toctree is in the deck.
- The deck opens with a title slide (course, chapter number, lecturer and date, set
  with ``-D aiinfra_deck_course=...`` or ``tools/book.py build --deck-date ...``),
  then the chapter's learning objectives (a section of its index page); it closes
  with a recap (each section's first key point), the chapter's questions and the
  works it cites (:class:`DeckStructure`).
- Each page is then cut into slides, with speaker notes (:mod:`.slide_layout`).
- The deck list (the front page of the slides build) gives each deck's length and a
  suggested time per section (:func:`deck_timing`).
"""

from __future__ import annotations

import pathlib
import posixpath
import re
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import SphinxPostTransform

from . import lectures as lectures_mod
from . import slide_layout
from .chapters import chapters
from .deck_text import Bibliography
from .editions import deck_pdf
from .languages import label
from .links import book_uri
from .questions import aiinfra_question

_BIBS: dict[str, Bibliography] = {}

# The references slides: how many works to a slide (two lines each, 1280x720).
REFERENCES_PER_SLIDE = 6
# The recap slides: how many pages to a slide (up to two lines each).
RECAP_PER_SLIDE = 8


def bibliography(env: BuildEnvironment) -> Bibliography:
    """The book's bibliography (``docs/_bib/*.bib``), read once per process."""
    files = sorted(pathlib.Path(f) for f in env.config.bibtex_bibfiles)
    key = "\0".join(map(str, files))
    if key not in _BIBS:
        _BIBS[key] = Bibliography(files)
    return _BIBS[key]


def chapter_indexes(env: BuildEnvironment) -> list[str]:
    """Docnames of the chapters' index pages, in book order."""
    root = env.config.root_doc
    return [f"{c}/index" for c in chapters(pathlib.Path(env.srcdir), root)]


def _is_toctree_wrapper(node: nodes.Node) -> bool:
    return isinstance(node, nodes.compound) and "toctree-wrapper" in node["classes"]


def _lang(config: Any) -> str:
    return config.language or "en"


class AssembleDeck(SphinxPostTransform):
    """In the revealjs build, replace a chapter index's toctree by its sections.

    Runs before references are resolved (priority 10), so that the sections' links,
    citations and ``only`` blocks are resolved as parts of the deck.
    """

    default_priority = 5
    builders = ("revealjs",)

    def run(self, **kwargs: Any) -> None:
        docname = self.env.current_document.docname
        indexes = chapter_indexes(self.env)
        if docname not in indexes:
            return
        # A lecture of the deck (slides/decks.toml): only its pages and questions.
        lecture = lectures_mod.lecture_of(self.env, docname)
        for wrapper in list(self.document.findall(_is_toctree_wrapper)):
            sections: list[nodes.Node] = []
            for toctree in wrapper.findall(addnodes.toctree):
                for _title, ref in toctree["entries"]:
                    if ref in self.env.all_docs:
                        tree = self.env.get_doctree(ref)
                        asks = any(tree.findall(aiinfra_question))
                        if (
                            lecture is not None
                            and not asks
                            and ref not in lecture.pages
                        ):
                            continue
                        for s in tree.children:
                            if isinstance(s, nodes.section):
                                s = s.deepcopy()
                                s["deck_page"] = ref
                                if (
                                    lecture is not None
                                    and asks
                                    and not (
                                        lectures_mod.keep_questions(
                                            s, lecture.questions
                                        )
                                    )
                                ):
                                    continue
                                sections.append(s)
            if sections:
                wrapper.replace_self(sections)
            else:
                wrapper.parent.remove(wrapper)
        top = self.document.next_node(nodes.section)
        if top is None:
            return
        self._title_slide(top, docname, indexes.index(docname) + 1, lecture)
        own = [
            s
            for s in top.children
            if isinstance(s, nodes.section) and "deck_page" not in s
        ]
        if lecture is not None and lecture.k > 1:
            for section in own:  # the objectives and the index's own sections
                top.remove(section)
            own = []
        # The learning objectives open the lecture (the book lists the sections
        # first): the section marked ``.. rst-class:: objectives``.
        for section in own:
            if "objectives" in section["classes"]:
                top.remove(section)
                first = top.first_child_matching_class(nodes.section)
                top.insert(len(top) if first is None else first, section)
                break
        if lecture is not None:
            self._agenda(top, lecture)

    def _title_slide(
        self,
        top: nodes.section,
        docname: str,
        number: int,
        lecture: lectures_mod.Lecture | None = None,
    ) -> None:
        """Course and chapter (or lecture) number above the title; lecturer, date,
        book below. A lecture's title names its part of the chapter."""
        lang, config = _lang(self.config), self.config
        course = config.aiinfra_deck_course or config.html_title
        chapter = label("chapter", lang, n=number)
        if lecture is not None:
            chapter = label("lecture", lang, n=lecture.number) + " · " + chapter
            title = top[0]
            title += nodes.Text(f" ({lecture.k}/{lecture.n})")
        top.insert(
            1,  # after the title; the slide's CSS shows it above
            nodes.paragraph("", f"{course} · {chapter}", classes=["deck-course"]),
        )
        meta = " · ".join(
            x for x in (config.aiinfra_deck_lecturer, config.aiinfra_deck_date) if x
        )
        link = nodes.reference(
            "",
            label("book", lang),
            refuri=book_uri(docname, docname, lang),
            classes=["booklink"],
        )
        at = 2  # after the course line and the title
        if meta:
            top.insert(at, nodes.paragraph("", meta, classes=["deck-meta"]))
            at += 1
        pdf = nodes.reference(  # the deck as PDF, beside it (tools/editions.py)
            "",
            label("slides_pdf", lang),
            refuri=posixpath.basename(deck_pdf(docname.split("/")[0], lang)),
            classes=["deck-pdf-link"],
        )
        top.insert(
            at,
            nodes.paragraph(
                "", "", link, nodes.Text(" · "), pdf, classes=["deck-booklink"]
            ),
        )

    def _agenda(self, top: nodes.section, lecture: lectures_mod.Lecture) -> None:
        """A lecture's agenda: the titles of its pages, before the first of them."""
        lang = _lang(self.config)
        items = [
            nodes.list_item("", nodes.paragraph("", s[0].astext()))
            for s in top.children
            if isinstance(s, nodes.section) and s.get("deck_page") in lecture.pages
        ]
        if not items:
            return
        slide = nodes.section("", ids=["deck-agenda"], classes=["deck-made"])
        slide += nodes.title("", label("in_this_lecture", lang))
        slide += nodes.bullet_list("", *items, classes=["on-slide", "deck-agenda"])
        slide += slide_layout.make_notes([], extra=[label("agenda_cue", lang)])
        pages = [
            s for s in top.children if isinstance(s, nodes.section) and "deck_page" in s
        ]
        at = top.index(pages[0]) if pages else len(top)
        top.insert(at, slide)


class DeckStructure(SphinxPostTransform):
    """Citations as author-year text; a deck's recap and references slides."""

    default_priority = 6
    builders = ("revealjs",)

    def run(self, **kwargs: Any) -> None:
        lang = _lang(self.config)
        bib = bibliography(self.env)
        cited: dict[str, None] = {}
        for xref in list(self.document.findall(addnodes.pending_xref)):
            if xref.get("refdomain") != "cite":
                continue
            keys = [k.strip() for k in xref["reftarget"].split(",") if k.strip()]
            cited.update(dict.fromkeys(keys))
            xref.replace_self(nodes.inline("", _citation(bib, keys, xref, lang)))
        for xref in list(self.document.findall(addnodes.pending_xref)):
            # A page that is not in the decks (running, notation, the glossary):
            # its title, as the book shows it, rather than its file name.
            target = xref.get("reftarget", "").lstrip("/")
            if xref.get("reftype") == "doc" and target not in self.env.all_docs:
                title = page_title(self.env, target) or xref.astext()
                xref.replace_self(nodes.inline("", title))
        docname = self.env.current_document.docname
        if docname not in chapter_indexes(self.env):
            return
        top = self.document.next_node(nodes.section)
        if top is None:
            return
        recap = self._recap(top, lang)
        if recap:
            pages = [s for s in top.children if isinstance(s, nodes.section)]
            questions = [s for s in pages if any(s.findall(aiinfra_question))]
            at = top.index(questions[0]) if questions else len(top)
            top[at:at] = recap
        if cited:
            top += self._references(sorted(cited, key=bib.entry), bib, lang)

    def _recap(self, top: nodes.section, lang: str) -> list[nodes.section]:
        """One line per page: its title and its first key point, in slides of at
        most :data:`RECAP_PER_SLIDE` lines, split evenly."""
        items: list[nodes.list_item] = []
        for page in top.children:
            if not isinstance(page, nodes.section) or "deck_page" not in page:
                continue
            keypoints = next(iter(page.findall(slide_layout.is_keypoints)), None)
            point = None if keypoints is None else keypoints.next_node(nodes.list_item)
            if point is None or any(page.findall(aiinfra_question)):
                continue
            para = nodes.paragraph("", "", nodes.strong("", page[0].astext()))
            para += nodes.Text(" — ")
            first = point.next_node(nodes.paragraph)
            para += [c.deepcopy() for c in (first or point).children]
            items.append(nodes.list_item("", para))
        n, size = -(-len(items) // RECAP_PER_SLIDE), len(items)
        parts = [items[size * k // n : size * (k + 1) // n] for k in range(n)]
        slides = []
        for k, part in enumerate(parts, 1):
            title = label("recap", lang) + (f" ({k}/{n})" if n > 1 else "")
            ids = ["deck-recap" + (f"-{k}" if k > 1 else "")]
            slide = nodes.section("", ids=ids, classes=["deck-made"])
            slide += nodes.title("", title)
            slide += nodes.bullet_list("", *part, classes=["on-slide", "deck-recap"])
            slide += slide_layout.make_notes([], extra=[label("recap_cue", lang)])
            slides.append(slide)
        return slides

    def _references(
        self, keys: list[str], bib: Bibliography, lang: str
    ) -> list[nodes.section]:
        """The works the deck cites, :data:`REFERENCES_PER_SLIDE` to a slide."""
        parts = [
            keys[i : i + REFERENCES_PER_SLIDE]
            for i in range(0, len(keys), REFERENCES_PER_SLIDE)
        ]
        slides = []
        for k, part in enumerate(parts, 1):
            title = label("references", lang)
            if len(parts) > 1:
                title += f" ({k}/{len(parts)})"
            ids = ["deck-references" + (f"-{k}" if k > 1 else "")]
            slide = nodes.section("", ids=ids, classes=["deck-made"])
            slide += nodes.title("", title)
            slide += nodes.bullet_list(
                "",
                *(nodes.list_item("", nodes.paragraph("", bib.entry(c))) for c in part),
                classes=["on-slide", "deck-references"],
            )
            slide += slide_layout.make_notes([], extra=[label("references_cue", lang)])
            slides.append(slide)
        return slides


def page_title(env: BuildEnvironment, docname: str) -> str:
    """A book page's title, in the build's language, read from its source."""
    from sphinx.locale import init as init_locale
    from sphinx.util.i18n import docname_to_domain

    path = pathlib.Path(env.srcdir) / f"{docname}.rst"
    if not path.is_file():
        return ""
    lines = path.read_text(encoding="utf-8").splitlines()
    title = next(
        (
            a.strip()
            for a, b in zip(lines, lines[1:], strict=False)
            if a.strip() and b.strip() and set(b.strip()) <= set("=-~^#*")
        ),
        "",
    )
    lang = _lang(env.config)
    if title and lang != "en":
        domain = docname_to_domain(docname, env.config.gettext_compact)
        dirs = [pathlib.Path(env.srcdir) / d for d in env.config.locale_dirs]
        catalog, found = init_locale(dirs, lang, domain)
        if found:
            title = catalog.gettext(title) or title
    return title


def _citation(
    bib: Bibliography, keys: list[str], xref: nodes.Element, lang: str
) -> str:
    """``(Thakur et al., 2005)`` for ``:cite:p:``; ``Thakur et al. (2005)`` for t."""
    found = [k for k in keys if k in bib.entries]
    if not found:
        return xref.astext()
    if xref.get("reftype") == "t":
        parts = [re.sub(r", (\S+)$", r" (\1)", bib.cite(k, lang)) for k in found]
        return label("cite_text_list", lang).join(parts)
    inner = label("cite_list", lang).join(bib.cite(k, lang) for k in found)
    return label("cite_brackets", lang, inner=inner)


def lay_out_slides(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Cut each page into slides with notes (revealjs build only); the deck list
    (the root document) is laid out by :func:`fill_deck_list` instead."""
    if app.builder.name != "revealjs" or docname == app.config.root_doc:
        return
    slide_layout.layout(doctree, _lang(app.config))


# ------------------------------------------------------------------ deck list


WORDS_PER_MINUTE = 130  # spoken English
CHARS_PER_MINUTE = 220  # spoken Chinese, characters
MIN_PER_SLIDE = 0.5  # the least a slide takes: read it, point at it
MIN_PER_FRAME = 0.25  # each further step of an algorithm
MIN_PER_QUESTION = 2.0  # students think, then the answer


def slide_minutes(slide: nodes.section) -> float:
    """Suggested minutes for one slide: its notes' prose read aloud, at least
    :data:`MIN_PER_SLIDE`, plus its extra frames or a question's thinking time."""
    notes = next(
        (c for c in slide.children if isinstance(c, slide_layout.deck_notes)), None
    )
    prose = ""
    if notes is not None:
        after = False
        for child in notes.children:
            if isinstance(child, nodes.transition):
                after = True
            elif after:
                prose += " " + child.astext()
    han = len(re.findall(r"[\u4e00-\u9fff]", prose))
    words = len(re.findall(r"[A-Za-z0-9]+", prose))
    minutes = max(MIN_PER_SLIDE, han / CHARS_PER_MINUTE + words / WORDS_PER_MINUTE)
    frames = [
        i
        for c in slide.children
        if not isinstance(c, nodes.section)
        for i in c.findall(nodes.image)
        if "deck-frame" in i["classes"]
    ]
    minutes += MIN_PER_FRAME * max(0, len(frames) - 1)
    if any(isinstance(c, aiinfra_question) for c in slide.children):
        minutes += MIN_PER_QUESTION
    return minutes


def deck_timing(app: Sphinx, chapter_index: str) -> list[tuple[str, int, float]]:
    """``(section title, slides, minutes)`` of a chapter's deck, in deck order: the
    title slide, then each top-level section (:func:`deck_sections`)."""
    return [
        (title, n, minutes)
        for _, title, n, minutes, _ in deck_sections(app, chapter_index)
    ]


def deck_sections(
    app: Sphinx, index: str
) -> list[tuple[str | None, str, int, float, int]]:
    """``(page, title, slides, minutes, questions)`` of a chapter's whole deck: the
    title slide, then each top-level section in deck order. ``page`` is ``None``
    for the title slide, the index page's own sections and the slides the build
    makes (recap, references); slides are the sections reveal.js shows (three
    levels deep).

    The deck is assembled and laid out as it is for writing (once per build).
    """
    if _SECTIONS.get("env") is not app.env:
        _SECTIONS.clear()
        _SECTIONS["env"] = app.env
    if index not in _SECTIONS:
        tree = app.env.get_and_resolve_doctree(index, app.builder)
        top = tree.next_node(nodes.section)
        rows = []
        if top is not None:
            rows.append((None, top[0].astext(), 1, slide_minutes(top), 0))
            for child in top.children:
                if isinstance(child, nodes.section):
                    count, minutes = _walk(child, 2)
                    asked = sum(1 for _ in child.findall(aiinfra_question))
                    rows.append(
                        (
                            child.get("deck_page"),
                            child[0].astext(),
                            count,
                            minutes,
                            asked,
                        )
                    )
        _SECTIONS[index] = rows
    return _SECTIONS[index]


_SECTIONS: dict[str, Any] = {}


def _walk(section: nodes.section, depth: int) -> tuple[int, float]:
    """Slides (three levels deep, as reveal.js shows them) and minutes of a section."""
    count, minutes = 1, slide_minutes(section)
    for child in section.children:
        if isinstance(child, nodes.section) and depth < 3:
            c, m = _walk(child, depth + 1)
            count, minutes = count + c, minutes + m
    return count, minutes


def _plural(text: str, lang: str) -> str:
    """English (or a language still showing the English label): 1 slide."""
    return re.sub(r"\b1 slides\b", "1 slide", text)


def fill_deck_list(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """The deck list: one slide per deck, with its length and minutes per section."""
    if app.builder.name != "revealjs" or docname != app.config.root_doc:
        return
    lang = _lang(app.config)
    lists = [
        b
        for b in doctree.findall(nodes.bullet_list)
        if "aiinfra-chapters" in b["classes"]
    ]
    indexes = chapter_indexes(app.env)
    cfg = lectures_mod.course(app.config)
    plans = lectures_mod.course_plan(app, indexes) if cfg.splits() else {}
    order = [f"{c}/index" for c in cfg.order([i.split("/")[0] for i in indexes])]
    for chapters_list in lists:
        host = chapters_list.parent
        while not isinstance(host, nodes.section):
            host = host.parent
        items = dict(zip(indexes, chapters_list.children, strict=False))
        slides = []
        for index in order:
            if index not in items:
                continue
            slides.append(_deck_slide(app, index, items[index], plans.get(index, [])))
        note = label(
            "timing_rule",
            lang,
            wpm=WORDS_PER_MINUTE,
            cpm=CHARS_PER_MINUTE,
            slide=MIN_PER_SLIDE,
            question=MIN_PER_QUESTION,
        )
        intro = [
            nodes.paragraph("", note, classes=["deck-timing-rule"]),
            nodes.paragraph(
                "", label("course_file", lang), classes=["deck-course-file"]
            ),
        ]
        if plans:
            total = sum(len(x) for x in plans.values())
            course = app.config.aiinfra_deck_course or app.config.html_title
            plan_text = label(
                "course_plan",
                lang,
                course=course,
                lectures=total,
                minutes=cfg.minutes_per_lecture
                or max(d.minutes_per_lecture for d in cfg.decks.values()),
            )
            intro.insert(
                0, nodes.paragraph("", plan_text, classes=["deck-course-plan"])
            )
        chapters_list.replace_self(intro)
        # Each deck a vertical slide under the list's section.
        first = host.first_child_matching_class(nodes.section)
        at = len(host) if first is None else first
        for k, slide in enumerate(slides):
            host.insert(at + k, slide)


def _deck_slide(
    app: Sphinx, index: str, item: nodes.Node, lectures: list
) -> nodes.section:
    """One deck's slide of the deck list: its links, length and sections; a deck
    cut into lectures lists its lectures instead, each with its link and length."""
    lang = _lang(app.config)
    rows = deck_timing(app, index)
    count = sum(r[1] for r in rows)
    total = round(sum(r[2] for r in rows))
    slide = nodes.section("", ids=[f"deck-{index.split('/')[0]}"])
    slide += nodes.title("", rows[0][0] if rows else index)
    links = item[0].deepcopy()  # the deck and the book
    deck_link = next(iter(links.findall(nodes.reference)))
    deck_link.children = [nodes.Text(label("open_deck", lang))]
    length = label("deck_length", lang, slides=count, minutes=total)
    links += nodes.Text(" · " + _plural(length, lang))
    links["classes"].append("deck-list-links")
    slide += links
    timing = nodes.bullet_list(classes=["deck-timing"])
    if len(lectures) > 1:
        chapter = index.split("/")[0]
        titles = {page: title for page, title, *_ in deck_sections(app, index) if page}
        for lecture in lectures:
            link = nodes.reference(
                "",
                label("lecture", lang, n=lecture.number),
                refuri=f"{chapter}/lecture-{lecture.k}.html",
            )
            text = label(
                "deck_length",
                lang,
                slides=lecture.slides,
                minutes=max(1, round(lecture.minutes)),
            )
            pages = label("list_separator", lang).join(
                titles.get(p, p) for p in lecture.pages
            )
            para = nodes.paragraph(
                "", "", link, nodes.Text(f" · {pages} · " + _plural(text, lang))
            )
            timing += nodes.list_item("", para)
        timing["classes"].append("deck-lectures")
    else:
        for title, n, minutes in rows[1:]:
            text = label(
                "section_timing",
                lang,
                title=title,
                slides=n,
                minutes=max(1, round(minutes)),
            )
            timing += nodes.list_item("", nodes.paragraph("", _plural(text, lang)))
    slide += timing
    return slide


# ------------------------------------------------------------------ incremental


def _reread(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    env._aiinfra_reread = set(docnames)


def decks_reread(env: BuildEnvironment) -> list[str]:
    """The chapter decks whose index or a section was re-read in this build."""
    reread = getattr(env, "_aiinfra_reread", set())
    return [
        index
        for index in chapter_indexes(env)
        if reread & {index, *env.toctree_includes.get(index, ())}
    ]


def _decks_to_rewrite(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """A deck whose section was re-read is written again, and so is the deck list
    (it times every deck)."""
    if app.builder.name != "revealjs":
        return []
    decks = decks_reread(env)
    return sorted(decks + ([env.config.root_doc] if decks else []))


def setup(app: Sphinx) -> None:
    # slides/decks.toml, read by conf.py (aiinfra_book.decks): the course.
    app.add_config_value("aiinfra_course", {}, "env", dict)
    app.add_config_value("aiinfra_deck_course", "", "env", str)
    app.add_config_value("aiinfra_deck_lecturer", "", "env", str)
    app.add_config_value("aiinfra_deck_date", "", "env", str)
    skip = (slide_layout._skip, None)
    app.add_node(
        slide_layout.deck_notes,
        html=(slide_layout.visit_deck_notes, slide_layout.depart_deck_notes),
        latex=skip,
        text=skip,
        man=skip,
        texinfo=skip,
    )
    app.add_post_transform(AssembleDeck)
    app.add_post_transform(DeckStructure)
    app.connect("env-before-read-docs", _reread)
    app.connect("env-get-updated", _decks_to_rewrite)
    app.connect("doctree-resolved", lay_out_slides)
    app.connect("doctree-resolved", fill_deck_list, priority=600)
    app.connect("html-collect-pages", lectures_mod.write_lectures)
