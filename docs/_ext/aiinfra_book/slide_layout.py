"""How a page of the book becomes slides (the revealjs build, ``doctree-resolved``).

A section's body is cut into *chunks*: each code listing, figure, table, formula or
question starts one, with the prose written before it as the chunk's speaker notes.
The section keeps its first chunk; every further chunk is a slide of its own under
the same title. Then each chunk is fitted to a 1280x720 slide:

- code shows the algorithm's lines: docstrings and argument checks are dropped
  (:func:`algorithm_lines`), Python is highlighted as Python, and a listing longer
  than :data:`CODE_LINES` continues on the next slide at a statement boundary;
- a table longer than :data:`TABLE_ROWS` continues on the next slide, header
  repeated, so that every row is seen and printed;
- a figure's caption keeps its first sentence (what the figure shows); the rest (how
  it was computed) moves into the notes; a figure with ``:frames:`` is a stack that
  the arrow key advances (:mod:`.figures`);
- a formula keeps the paragraph that defines its symbols (``.. rst-class:: symbols``);
- a section with no listing, figure or table shows its first sentence.

Every slide gets notes (:class:`deck_notes`): a cue list (each paragraph's first
sentence), then the book's prose, formulas in Unicode and citations as author-year
text (:mod:`.deck_text`). Key points get a slide of their own.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable

from docutils import nodes

from .deck_text import cue, first_sentence, tex_to_text
from .languages import label
from .questions import aiinfra_question

CODE_LINES = 15  # a projector shows about 15 lines of code legibly
TABLE_ROWS = 10  # body rows of a table on one slide, header repeated
# Blocks that stay on the slide under their table, figure or listing, and blocks
# the author marked for the slide (``.. rst-class:: on-slide`` / ``symbols``).
STAYS = {
    "aiinfra-table-note",
    "aiinfra-source",
    "on-slide",
    "symbols",
    "deck-lead",
    "deck-course",
    "deck-meta",
}


class deck_notes(nodes.General, nodes.Element):  # noqa: N801 - docutils style
    """Speaker notes of one slide: cues, then the book's prose (rendered HTML)."""


def visit_deck_notes(self: nodes.NodeVisitor, node: deck_notes) -> None:
    self.body.append('<aside class="notes">\n')


def depart_deck_notes(self: nodes.NodeVisitor, node: deck_notes) -> None:
    self.body.append("</aside>\n")


def _skip(self: nodes.NodeVisitor, node: nodes.Node) -> None:
    raise nodes.SkipNode


# ------------------------------------------------------------------ notes


def speakable(node: nodes.Node) -> nodes.Node:
    """A copy of prose for the notes: maths as Unicode, links as plain text."""
    node = node.deepcopy()
    for math in list(node.findall(nodes.math)):
        math.replace_self(nodes.Text(tex_to_text(math.astext())))
    for block in list(node.findall(nodes.math_block)):
        block.replace_self(nodes.paragraph("", tex_to_text(block.astext())))
    for ref in list(node.findall(nodes.reference)):  # the speaker view is not a browser
        ref.replace_self(nodes.inline("", "", *ref.children))
    for target in list(node.findall(nodes.target)):
        if target.parent is not None:  # a bare target (a label) has none: no text
            target.parent.remove(target)
    return node


def _text(node: nodes.Node) -> str:
    return " ".join(speakable(node).astext().split())


def make_notes(prose: Iterable[nodes.Node], extra: Iterable[str] = ()) -> deck_notes:
    """Notes: the first sentence of each paragraph as cues, then the prose itself."""
    prose = list(prose)
    notes = deck_notes("", classes=["deck-notes"])
    cues = [cue(_text(p)) for p in prose if _text(p)] + list(extra)
    if cues:
        notes += nodes.bullet_list(
            "",
            *(nodes.list_item("", nodes.paragraph("", c)) for c in cues),
            classes=["cues"],
        )
    if prose:
        notes += nodes.transition()
        notes += [speakable(p) for p in prose]
    return notes


# ------------------------------------------------------------------ code


def algorithm_lines(code: str) -> list[str]:
    """A Python listing without docstrings, argument checks and extra blank lines.

    An argument check is an ``if`` whose whole body raises (no ``else``): on a slide
    the algorithm matters, the book keeps the checks.
    """
    code = textwrap.dedent(code)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code.splitlines()
    drop: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            drop |= set(range(body[0].lineno - 1, body[0].end_lineno))
        if (
            isinstance(node, ast.If)
            and not node.orelse
            and all(isinstance(s, ast.Raise) for s in node.body)
        ):
            drop |= set(range(node.lineno - 1, node.end_lineno))
    lines = [line for i, line in enumerate(code.splitlines()) if i not in drop]
    out: list[str] = []
    for line in lines:  # one blank line at most, none at either end
        if line.strip() or (out and out[-1].strip()):
            out.append(line.rstrip())
    while out and not out[-1].strip():
        out.pop()
    return out


def _open_brackets(lines: list[str]) -> int:
    text = "\n".join(lines)
    text = re.sub(r"#.*", "", re.sub(r"(\"|')(?:\\.|(?!\1).)*\1", "", text))
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


def split_code(lines: list[str], limit: int = CODE_LINES) -> list[list[str]]:
    """Cut a listing into parts of at most ``limit`` lines, between statements.

    A cut is made after a line that closes every bracket, preferably at a blank line
    or before a line at the listing's outer indentation.
    """
    if len(lines) <= limit:
        return [lines]
    parts: list[list[str]] = []
    rest = lines
    while len(rest) > limit:
        best, best_score = limit, -1
        for k in range(limit // 2, limit + 1):
            head, nxt = rest[:k], rest[k] if k < len(rest) else ""
            if _open_brackets(head) or head[-1].rstrip().endswith(("\\", ":")):
                continue
            indent = len(nxt) - len(nxt.lstrip())
            score = 3 if not nxt.strip() else 2 if indent <= 4 else 1
            if nxt.lstrip().startswith((")", "]", "}", "else", "elif", "except")):
                score = 0
            if score >= best_score:
                best, best_score = k, score
        parts.append(rest[:best])
        rest = rest[best:]
        while rest and not rest[0].strip():
            rest = rest[1:]
    if rest:
        parts.append(rest)
    return parts


def _font_class(lines: list[str]) -> str:
    """A size class (``code-22``) at which the widest line fits a 1280 px slide."""
    width = max((len(line) for line in lines), default=1)
    for size in (28, 26, 24, 22, 20):
        if width * size * 0.6 <= 1180:
            return f"code-{size}"
    return "code-18"


def fit_code(block: nodes.Element) -> list[nodes.Element]:
    """The slide parts of a listing (a literal block or its listing container)."""
    literal = next(iter(block.findall(nodes.literal_block)))
    source = literal.get("source", "") or ""
    language = literal.get("language", "")
    if source.endswith(".py") or language in ("python", "py", "default", ""):
        language = "python"
    elif language == "console":
        language = "shell"
    lines = (
        algorithm_lines(literal.astext())
        if language == "python"
        else literal.astext().splitlines()
    )
    parts = split_code(lines)
    out = []
    for k, part in enumerate(parts):
        copy = block.deepcopy()
        lit = next(iter(copy.findall(nodes.literal_block)))
        text = "\n".join(part)
        lit.children = [nodes.Text(text)]
        lit.rawsource = text
        lit["language"] = language
        lit["linenos"] = False
        if len(parts) > 1:
            lit["classes"].append(f"part-{k + 1}-of-{len(parts)}")
        wrapper = nodes.container("", copy, classes=["deck-code", _font_class(lines)])
        if k > 0:  # the source line belongs under the first part only
            for para in list(copy.findall(nodes.paragraph)):
                if "aiinfra-source" in para["classes"]:
                    para.parent.remove(para)
        out.append(wrapper)
    return out


# ------------------------------------------------------------------ tables


def fit_table(table: nodes.table) -> list[nodes.table]:
    """The table, or its rows over several tables of :data:`TABLE_ROWS` each."""
    body = next(iter(table.findall(nodes.tbody)), None)
    if body is None or len(body) <= TABLE_ROWS:
        return [table]
    rows = list(body.children)
    count = -(-len(rows) // TABLE_ROWS)
    base, extra = divmod(len(rows), count)  # even parts: 25 rows -> 9 + 8 + 8
    parts, start = [], 0
    for k in range(count):
        size = base + (k < extra)
        copy = table.deepcopy()
        new_body = next(iter(copy.findall(nodes.tbody)))
        new_body.children = []
        for row in rows[start : start + size]:
            new_body += row.deepcopy()
        start += size
        copy["classes"].append("deck-table-part")
        parts.append(copy)
    return parts


def table_font_class(table: nodes.table) -> str:
    """``table-24``: the largest size (px) at which the table's rows fit the slide.

    A column is as wide as its widest body cell, or half its header (headers wrap to
    two lines); a character is about 0.55 em, a cell's padding about 1 em.
    """
    widths: dict[int, float] = {}
    for part, factor in ((nodes.thead, 0.5), (nodes.tbody, 1.0)):
        for section in table.findall(part):
            for row in section.children:
                for k, entry in enumerate(row.children):
                    length = len(entry.astext()) * factor
                    widths[k] = max(widths.get(k, 0.0), length)
    em = sum(0.55 * w + 1.0 for w in widths.values()) or 1.0
    for size in (28, 26, 24, 22, 20, 18):
        if em * size <= 1180:
            return f"table-{size}"
    return "table-16"


# ------------------------------------------------------------------ figures


def fit_figure(figure: nodes.figure) -> tuple[nodes.figure, list[nodes.Node]]:
    """The figure with its caption's first sentence; the rest goes to the notes."""
    to_notes: list[nodes.Node] = []
    caption = next(iter(figure.findall(nodes.caption)), None)
    if caption is not None:
        full = nodes.paragraph("", "", *[c.deepcopy() for c in caption.children])
        spoken = _text(full)  # maths as Unicode: a caption is one line of text
        short = first_sentence(spoken)
        if short != spoken or any(full.findall(nodes.math)):
            to_notes.append(full)
            caption.children = []
            caption += nodes.Text(short)
    for legend in list(figure.findall(nodes.legend)):
        to_notes += [c.deepcopy() for c in legend.children]
        legend.parent.remove(legend)
    frames = next(
        (c for c in figure.findall(nodes.container) if "deck-frames" in c["classes"]),
        None,
    )
    if frames is not None:  # the stack replaces the book's figure
        for image in list(figure.children):
            if isinstance(image, nodes.image):
                figure.remove(image)
    figure["classes"].append("deck-figure")
    return figure, to_notes


# ------------------------------------------------------------------ sections


def is_visual(node: nodes.Node) -> bool:
    """A block that starts a slide: code, figure, table, formula or question."""
    if isinstance(
        node,
        nodes.literal_block
        | nodes.figure
        | nodes.table
        | nodes.math_block
        | aiinfra_question,
    ):
        return True
    return isinstance(node, nodes.container) and any(
        True for _ in node.findall(nodes.literal_block)
    )


def _stays(node: nodes.Node) -> bool:
    classes = set(node.get("classes", [])) if isinstance(node, nodes.Element) else set()
    if STAYS & classes:
        return True
    return any("booklink" in r["classes"] for r in node.findall(nodes.reference))


def is_keypoints(node: nodes.Node) -> bool:
    return isinstance(node, nodes.admonition) and "keypoints" in node["classes"]


def section_depth(section: nodes.Node) -> int:
    depth, p = 0, section
    while isinstance(p, nodes.section):
        depth, p = depth + 1, p.parent
    return depth


class Chunk:
    """One slide's worth of a section: what it shows and the prose of its notes."""

    def __init__(self) -> None:
        self.items: list[nodes.Node] = []
        self.prose: list[nodes.Node] = []
        self.extra: list[nodes.Node] = []  # caption remainders: after the prose


def _fit(item: nodes.Node, chunk: Chunk) -> list[list[nodes.Node]]:
    """Fit one visual: the list of slides it needs (each a list of nodes)."""
    if isinstance(item, nodes.table):
        parts = fit_table(item)
        size = table_font_class(item)  # one size for every part of the table
        for part in parts:
            part["classes"].append(size)
        return [[p] for p in parts]
    if isinstance(item, nodes.figure):
        figure, extra = fit_figure(item)
        chunk.extra += extra
        return [[figure]]
    if isinstance(item, nodes.literal_block) or (
        isinstance(item, nodes.container) and not isinstance(item, aiinfra_question)
    ):
        return [[p] for p in fit_code(item)]
    if isinstance(item, aiinfra_question):
        answer = item.children[-1]
        chunk.extra += [c.deepcopy() for c in answer.children]
        return [[item]]
    return [[item]]


def _show_cue(items: list[nodes.Node], lang: str) -> str:
    """What to do with a slide whose section has no prose of its own."""
    for item in items:
        if isinstance(item, nodes.figure):
            image = next(iter(item.findall(nodes.image)), None)
            if image is not None and image.get("alt"):
                return image["alt"]
            return label("cue_figure", lang)
        if isinstance(item, nodes.table):
            return label("cue_table", lang)
        if is_visual(item):
            return label("cue_code", lang)
    return label("cue_figure", lang)


def layout_section(section: nodes.section, lang: str) -> None:
    """Cut one section into slides (see the module docstring)."""
    if not section.children or not isinstance(section[0], nodes.title):
        return
    body = [
        c
        for c in section.children[1:]
        if not isinstance(c, nodes.section | deck_notes) and not is_keypoints(c)
    ]
    chunks: list[Chunk] = [Chunk()]
    pending: list[nodes.Node] = []  # prose waiting for the visual it introduces
    first_visual_seen = False
    for child in body:
        section.remove(child)
        if is_visual(child):
            if first_visual_seen:
                chunks.append(Chunk())
            chunks[-1].prose += pending
            pending = []
            first_visual_seen = True
            chunks[-1].items.append(child)
        elif _stays(child):
            chunks[-1].items.append(child)
        else:
            pending.append(child)
    last = chunks[-1]
    last.prose += pending
    if not first_visual_seen:
        # No listing, figure or table: the slide shows the section's key sentence.
        paragraphs = [p for p in last.prose if isinstance(p, nodes.paragraph)]
        if paragraphs:
            lead = nodes.paragraph(
                "",
                first_sentence(" ".join(speakable(paragraphs[0]).astext().split())),
                classes=["deck-lead"],
            )
            last.items.insert(0, lead)
    slides: list[tuple[list[nodes.Node], deck_notes]] = []
    for chunk in chunks:
        fitted: list[list[nodes.Node]] = [[]]
        for item in chunk.items:
            if is_visual(item):
                parts = _fit(item, chunk)
                fitted[-1] += parts[0]
                fitted += [list(p) for p in parts[1:]]
            else:
                fitted[-1].append(item)
        cues = [] if chunk.prose else [_show_cue(chunk.items, lang)]
        notes = make_notes([*chunk.prose, *chunk.extra], extra=cues)
        slides.append((fitted[0], notes))
        total = len(fitted)
        for k, part in enumerate(fitted[1:], start=2):
            cont = label("continued", lang, k=k, n=total)
            slides.append((part, make_notes([*chunk.prose], extra=[cont])))
    _place(section, slides)


def _place(
    section: nodes.section, slides: list[tuple[list[nodes.Node], deck_notes]]
) -> None:
    """The first slide's content stays in ``section``; the others follow it."""
    at = section.first_child_matching_class(nodes.section)
    at = len(section) if at is None else at
    first, notes = slides[0]
    for k, node in enumerate([*first, notes]):
        section.insert(at + k, node)
    new = []
    for k, (items, notes) in enumerate(slides[1:], start=2):
        base = section["ids"][0] if section["ids"] else "s"
        slide = nodes.section("", ids=[f"{base}-{k}"], classes=["deck-continued"])
        slide += section[0].deepcopy()
        slide += items
        slide += notes
        new.append(slide)
    if not new:
        return
    if section_depth(section) >= 3:  # a vertical slide: continue beside it
        parent = section.parent
        at = parent.index(section) + 1
        for k, slide in enumerate(new):
            parent.insert(at + k, slide)
    else:  # a stack's first slide: continue as the stack's next vertical slides
        at = section.first_child_matching_class(nodes.section)
        at = len(section) if at is None else at
        for k, slide in enumerate(new):
            section.insert(at + k, slide)


def keypoints_slides(doctree: nodes.document, lang: str) -> None:
    """Each "Key points" admonition becomes a slide of its own, with notes."""
    for adm in list(doctree.findall(is_keypoints)):
        parent = adm.parent
        title = adm.next_node(nodes.title)
        if title is None or not isinstance(parent, nodes.section):
            continue
        # reveal.js nests at most two levels (horizontal, then vertical).
        host = parent if section_depth(parent) <= 2 else parent.parent
        slide = nodes.section(
            "", ids=[f"keypoints-{id(adm)}"], classes=["deck-keypoints"]
        )
        slide += nodes.title("", "", *title.children)
        title.parent.remove(title)
        parent.remove(adm)
        adm["classes"].append("keypoints-slide")
        slide += adm
        section_title = parent[0].astext() if parent.children else ""
        cue = label("keypoints_cue", lang, title=section_title)
        items = [p for p in adm.findall(nodes.list_item)]
        slide += make_notes(items, extra=[cue])
        host += slide


def layout(doctree: nodes.document, lang: str) -> None:
    """Lay out every section of a deck (see the module docstring)."""
    keypoints_slides(doctree, lang)
    for section in list(doctree.findall(nodes.section)):
        if "deck-keypoints" in section["classes"] or "deck-made" in section["classes"]:
            continue
        layout_section(section, lang)
