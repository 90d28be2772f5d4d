"""Sphinx extension: the book computes its numbers, tables and figures from the code.

- ``:calc:`module:expression|format``` evaluates ``expression`` in ``module``'s
  namespace at build time and inserts the formatted value, so prose cannot drift from
  the reference package.
- ``.. aiinfra-figure:: module:expression`` calls a function returning a matplotlib
  ``Figure`` and inserts it as an SVG figure; the directive's content is the caption.
- ``.. aiinfra-table:: module:expression`` renders an :class:`aiinfra.report.Table`;
  its header cells are translatable, its data cells are not.
- In the revealjs (slides) build, a section's prose moves into the speaker notes and
  each "Key points" admonition becomes a slide of its own.
- ``:booklink:`text <chapter/page>``` links a deck to the book page in the same
  language.

Values, tables and figures are cached on disk by expression and a hash of the
package's sources, so the four builds (two languages, book and slides) compute each
once.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import pathlib
import pickle
import re
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective, SphinxRole

logger = logging.getLogger(__name__)

DOCS = pathlib.Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
PACKAGE = ROOT / "reference" / "aiinfra"
CACHE = ROOT / "build" / ".calc-cache"
GENERATED = DOCS / "_generated"


def _sources_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode())
        h.update(path.read_bytes())
    for path in sorted((DOCS / "_data").rglob("*.json")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


_HASH: str | None = None


def evaluate(target: str) -> Any:
    """Evaluate ``module:expression`` (cached on disk by sources hash).

    Raises:
        ValueError: ``target`` has no ``module:`` prefix.
    """
    global _HASH
    module_name, sep, expression = target.partition(":")
    if not sep or not module_name.strip() or not expression.strip():
        raise ValueError(
            f"expected 'module:expression', e.g. 'aiinfra.comm.cost:busbw_factor(...)',"
            f" got {target!r}"
        )
    if _HASH is None:
        _HASH = _sources_hash()
    key = hashlib.sha256(f"{_HASH}\0{target}".encode()).hexdigest()[:24]
    cached = CACHE / f"{key}.pickle"
    if cached.exists():
        return pickle.loads(cached.read_bytes())
    module = importlib.import_module(module_name.strip())
    namespace = dict(vars(module), DOCS=DOCS)
    value = eval(expression.strip(), namespace)  # noqa: S307 - the book's own sources
    if not _is_figure(value):
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            cached.write_bytes(pickle.dumps(value))
        except (pickle.PicklingError, TypeError, AttributeError):
            pass
    return value


def _is_figure(value: Any) -> bool:
    return type(value).__name__ == "Figure" and hasattr(value, "savefig")


def format_value(value: Any, spec: str) -> str:
    """Format a computed value: a Python format spec or ``bytes``/``si``/``pct``."""
    spec = spec.strip()
    if spec == "bytes":
        units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        v, i = float(value), 0
        while abs(v) >= 1024 and i < len(units) - 1:
            v, i = v / 1024, i + 1
        return f"{v:.3g} {units[i]}" if i else f"{int(value)} B"
    if spec == "si":
        prefixes = ["", "k", "M", "G", "T", "P", "E"]
        v, i = float(value), 0
        while abs(v) >= 1000 and i < len(prefixes) - 1:
            v, i = v / 1000, i + 1
        return f"{v:.3g} {prefixes[i]}".rstrip()
    if spec == "pct":
        return f"{100 * float(value):.1f} %"
    return format(value, spec) if spec else str(value)


class CalcRole(SphinxRole):
    """``:calc:`module:expression|spec```: a number computed at build time."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        target, _, spec = self.text.rpartition("|")
        if not target:  # no "|": the whole text is the target
            target, spec = self.text, ""
        try:
            text = format_value(evaluate(target), spec)
        except Exception as exc:  # noqa: BLE001 - reported as a build error
            msg = self.inliner.reporter.error(
                f":calc:`{self.text}` failed: {type(exc).__name__}: {exc}",
                line=self.lineno,
            )
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        return [nodes.inline(self.rawtext, text, classes=["calc"])], []


class FigureDirective(SphinxDirective):
    """``.. aiinfra-figure:: module:expression``: a figure drawn at build time."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {"alt": directives.unchanged, "width": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        target = self.arguments[0]
        name = hashlib.sha256(target.encode()).hexdigest()[:16] + ".svg"
        path = GENERATED / name
        try:
            figure = evaluate(target)
            if not _is_figure(figure):
                raise TypeError(f"expected a matplotlib Figure, got {type(figure)}")
            GENERATED.mkdir(exist_ok=True)
            buf = io.StringIO()
            figure.savefig(
                buf, format="svg", metadata={"Date": None}, bbox_inches="tight"
            )
            # Deterministic ids: matplotlib salts them randomly unless told.
            svg = buf.getvalue()
            if not path.exists() or path.read_text() != svg:
                path.write_text(svg)
        except Exception as exc:  # noqa: BLE001
            return [
                self.state_machine.reporter.error(
                    f"aiinfra-figure {target!r} failed: {type(exc).__name__}: {exc}",
                    line=self.lineno,
                )
            ]
        self.env.note_dependency(str(path))
        image = nodes.image(uri="/_generated/" + name, alt=self.options.get("alt", ""))
        if "width" in self.options:
            image["width"] = self.options["width"]
        fig = nodes.figure("", image, classes=["aiinfra-figure"])
        if self.content:
            node = nodes.Element()
            self.state.nested_parse(self.content, self.content_offset, node)
            first = node[0] if len(node) else None
            if isinstance(first, nodes.paragraph):
                caption = nodes.caption(first.rawsource, "", *first.children)
                caption.source, caption.line = first.source, first.line
                fig += caption
                rest = node.children[1:]
            else:
                rest = node.children
            if rest:
                fig += nodes.legend("", *rest)
        self.add_name(fig)
        return [fig]


class TableDirective(SphinxDirective):
    """``.. aiinfra-table:: module:expression``: a Table computed at build time."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self) -> list[nodes.Node]:
        target = self.arguments[0]
        try:
            table = evaluate(target)
            columns, rows, note = table.columns, table.rows, table.note
        except Exception as exc:  # noqa: BLE001
            return [
                self.state_machine.reporter.error(
                    f"aiinfra-table {target!r} failed: {type(exc).__name__}: {exc}",
                    line=self.lineno,
                )
            ]
        from aiinfra.report import format_cell

        source, line = self.get_source_info()
        tnode = nodes.table(classes=["aiinfra-table"])
        if self.content:
            text = " ".join(line.strip() for line in self.content if line.strip())
            title = nodes.title(text, text)
            title.source, title.line = source, line
            tnode += title
        group = nodes.tgroup(cols=len(columns))
        tnode += group
        for _ in columns:
            group += nodes.colspec(colwidth=1)
        thead, tbody = nodes.thead(), nodes.tbody()
        hrow = nodes.row()
        for col in columns:
            para = nodes.paragraph(col, col)
            para.source, para.line = source, line  # translatable
            hrow += nodes.entry("", para)
        thead += hrow
        for r in rows:
            row = nodes.row()
            for v in r:
                row += nodes.entry("", nodes.paragraph("", format_cell(v)))
            tbody += row
        group += thead
        group += tbody
        out: list[nodes.Node] = [tnode]
        if note:
            para = nodes.paragraph("", note, classes=["aiinfra-table-note"])
            # Computed text (a stamp, numbers): never a message to translate.
            para["translatable"] = False
            out.append(para)
        return out


class BookLinkRole(SphinxRole):
    """``:booklink:`text <chapter/page>```: link a slide deck to the book page."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        m = re.fullmatch(r"(.*?)\s*<([^<>]+)>", self.text, re.S)
        if not m:
            msg = self.inliner.reporter.error(
                f":booklink: expects 'text <page>', got {self.text!r}", line=self.lineno
            )
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        text, page = m.groups()
        lang = self.config.language or "en"
        depth = self.env.docname.count("/")
        # Site layout: <site>/slides/<lang>/<doc>.html and <site>/<lang>/<page>.html
        uri = "../" * (depth + 2) + f"{lang}/{page}.html"
        node = nodes.reference(self.rawtext, text, refuri=uri, classes=["booklink"])
        return [node], []


class MathIsNotProse(SphinxTransform):
    """Keep display math out of the translation catalogues: it reads the same in
    both languages. Runs before Sphinx's Locale transform (priority 20)."""

    default_priority = 10

    def apply(self, **kwargs: Any) -> None:
        for node in self.document.findall(nodes.math_block):
            node["translatable"] = False


# ---------------------------------------------------------------- slides


def _has_booklink(node: nodes.Node) -> bool:
    return any("booklink" in n["classes"] for n in node.findall(nodes.reference))


def _is_keypoints(node: nodes.Node) -> bool:
    return isinstance(node, nodes.admonition) and "keypoints" in node["classes"]


PROSE = (
    nodes.paragraph,
    nodes.bullet_list,
    nodes.enumerated_list,
    nodes.block_quote,
    nodes.definition_list,
    nodes.note,
    nodes.tip,
    nodes.warning,
    nodes.important,
    nodes.footnote,
    nodes.citation,
    nodes.line_block,
)


def prose_to_notes(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """In the slides build, move prose into speaker notes; key points get a slide."""
    if app.builder.name != "revealjs":
        return
    from sphinx_revealjs._ext.notes import revealjs_notes

    for section in list(doctree.findall(nodes.section)):
        notes = []
        for child in list(section.children):
            if _is_keypoints(child) or _has_booklink(child):
                continue
            if "aiinfra-table-note" in child.get("classes", []):
                continue  # a table's stamp stays under its table
            if isinstance(child, PROSE) or isinstance(child, nodes.admonition):
                # Speaker notes are plain text; keep paragraphs apart.
                notes.append(child.astext())
                section.remove(child)
        if notes:
            # Before the first sub-section: a note belongs to this slide, and the
            # sub-sections are slides of their own.
            at = section.first_child_matching_class(nodes.section)
            note = revealjs_notes("", nodes.paragraph("", "\n\n".join(notes)))
            section.insert(len(section) if at is None else at, note)
    for adm in list(doctree.findall(_is_keypoints)):
        parent = adm.parent
        title = adm.next_node(nodes.title)
        if title is None or not isinstance(parent, nodes.section):
            continue
        # Depth of the enclosing section decides where the new slide goes: reveal.js
        # nests at most two levels (horizontal, then vertical).
        depth, p = 0, parent
        while isinstance(p, nodes.section):
            depth, p = depth + 1, p.parent
        host = parent if depth <= 2 else parent.parent
        slide = nodes.section("", ids=[f"keypoints-{id(adm)}"])
        slide += nodes.title("", "", *title.children)
        title.parent.remove(title)
        parent.remove(adm)
        adm["classes"].append("keypoints-slide")
        slide += adm
        host += slide
    for section in list(doctree.findall(nodes.section)):
        _one_visual_per_slide(section)


def _section_depth(section: nodes.section) -> int:
    depth, p = 0, section
    while isinstance(p, nodes.section):
        depth, p = depth + 1, p.parent
    return depth


def is_visual(node: nodes.Node) -> bool:
    """A block that fills a slide: code, a figure or a table."""
    if isinstance(node, nodes.literal_block | nodes.figure | nodes.table):
        return True
    return isinstance(node, nodes.container) and any(
        True for _ in node.findall(nodes.literal_block)
    )


def _one_visual_per_slide(section: nodes.section) -> None:
    """Give each code block, figure or table after the first a slide of its own,
    under the same title, so that nothing runs off the bottom of a slide."""
    from sphinx_revealjs._ext.notes import revealjs_notes

    # The speaker notes stay with the first slide, where the section's prose starts.
    body = [
        c
        for c in section.children[1:]
        if not isinstance(c, nodes.section | revealjs_notes)
    ]
    if sum(is_visual(c) for c in body) < 2 or not isinstance(section[0], nodes.title):
        return
    chunks: list[list[nodes.Node]] = [[]]
    for child in body:
        if is_visual(child) and any(is_visual(c) for c in chunks[-1]):
            chunks.append([])
        chunks[-1].append(child)
    new = []
    for chunk in chunks[1:]:
        slide = nodes.section(
            "", ids=[f"{section['ids'][0] if section['ids'] else 's'}-{len(new) + 2}"]
        )
        slide += section[0].deepcopy()
        for child in chunk:
            section.remove(child)
            slide += child
        new.append(slide)
    if _section_depth(section) >= 3:  # a vertical slide: continue beside it
        parent = section.parent
        at = parent.index(section) + 1
        for k, slide in enumerate(new):
            parent.insert(at + k, slide)
    else:  # a stack's first slide: continue as the stack's next vertical slides
        at = section.first_child_matching_class(nodes.section)
        at = len(section) if at is None else at
        for k, slide in enumerate(new):
            section.insert(at + k, slide)


# ---------------------------------------------------------------- html context


def page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """Give templates the counterpart-language URL and the chapter's deck URL."""
    if app.builder.name != "html":
        return
    lang = app.config.language or "en"
    other = "zh_CN" if lang == "en" else "en"
    up = "../" * (pagename.count("/") + 1)
    context["aiinfra_lang"] = lang
    context["aiinfra_other_lang"] = other
    context["aiinfra_other_label"] = "中文" if other == "zh_CN" else "English"
    context["aiinfra_other_url"] = f"{up}{other}/{pagename}.html"
    chapter = pagename.split("/")[0]
    if "/" in pagename and (DOCS / chapter / "slides.rst").exists():
        context["aiinfra_deck_url"] = f"{up}slides/{lang}/{chapter}/slides.html"
    else:
        context["aiinfra_deck_url"] = ""


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_role("calc", CalcRole())
    app.add_role("booklink", BookLinkRole())
    app.add_directive("aiinfra-figure", FigureDirective)
    app.add_directive("aiinfra-table", TableDirective)
    app.add_transform(MathIsNotProse)
    app.connect("doctree-resolved", prose_to_notes)
    app.connect("html-page-context", page_context)
    return {"version": "1.0", "parallel_read_safe": False, "parallel_write_safe": False}
