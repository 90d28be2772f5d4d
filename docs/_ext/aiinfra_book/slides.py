"""The slide decks: the book's own pages, laid out for reveal.js.

- A chapter's deck is its ``index`` page built by the revealjs builder, with the
  chapter's toctree replaced by the sections it lists (:class:`AssembleDeck`): no
  per-chapter deck file exists, and a section added to the toctree is in the deck.
- A section's prose moves into the speaker notes; each "Key points" admonition gets a
  slide of its own; a section with several figures, tables or listings is split so
  that each has a slide (:func:`prose_to_notes`).
"""

from __future__ import annotations

import pathlib
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.transforms.post_transforms import SphinxPostTransform

from .chapters import chapters
from .links import LABELS, book_uri


def chapter_indexes(env: BuildEnvironment) -> set[str]:
    """Docnames of the chapters' index pages."""
    root = env.config.root_doc
    return {f"{c}/index" for c in chapters(pathlib.Path(env.srcdir), root)}


def _is_toctree_wrapper(node: nodes.Node) -> bool:
    return isinstance(node, nodes.compound) and "toctree-wrapper" in node["classes"]


class AssembleDeck(SphinxPostTransform):
    """In the revealjs build, replace a chapter index's toctree by its sections.

    Runs before references are resolved (priority 10), so that the sections' links,
    citations and ``only`` blocks are resolved as parts of the deck.
    """

    default_priority = 5
    builders = ("revealjs",)

    def run(self, **kwargs: Any) -> None:
        docname = self.env.current_document.docname
        if docname not in chapter_indexes(self.env):
            return
        for wrapper in list(self.document.findall(_is_toctree_wrapper)):
            sections: list[nodes.Node] = []
            for toctree in wrapper.findall(addnodes.toctree):
                for _title, ref in toctree["entries"]:
                    if ref in self.env.all_docs:
                        tree = self.env.get_doctree(ref)
                        sections += [
                            s.deepcopy()
                            for s in tree.children
                            if isinstance(s, nodes.section)
                        ]
            if sections:
                wrapper.replace_self(sections)
            else:
                wrapper.parent.remove(wrapper)
        top = self.document.next_node(nodes.section)
        if top is not None:
            lang = self.config.language or "en"
            link = nodes.reference(
                "",
                LABELS["book"][lang],
                refuri=book_uri(docname, docname, lang),
                classes=["booklink"],
            )
            top.insert(1, nodes.paragraph("", "", link, classes=["deck-booklink"]))


def _reread(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    env._aiinfra_reread = set(docnames)


def _decks_to_rewrite(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """A deck whose section was re-read is written again (incremental builds)."""
    if app.builder.name != "revealjs":
        return []
    reread = getattr(env, "_aiinfra_reread", set())
    return sorted(
        index
        for index in chapter_indexes(env)
        if reread & set(env.toctree_includes.get(index, ()))
    )


# ---------------------------------------------------------------- slide layout


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
# Small print that stays under its table, figure or listing on the slide.
STAYS = {"aiinfra-table-note", "aiinfra-source"}


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
            if STAYS & set(child.get("classes", [])):
                continue
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
        # reveal.js nests at most two levels (horizontal, then vertical).
        host = parent if _section_depth(parent) <= 2 else parent.parent
        slide = nodes.section("", ids=[f"keypoints-{id(adm)}"])
        slide += nodes.title("", "", *title.children)
        title.parent.remove(title)
        parent.remove(adm)
        adm["classes"].append("keypoints-slide")
        slide += adm
        host += slide
    for section in list(doctree.findall(nodes.section)):
        _one_visual_per_slide(section)


def _section_depth(section: nodes.Node) -> int:
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


def setup(app: Sphinx) -> None:
    app.add_post_transform(AssembleDeck)
    app.connect("env-before-read-docs", _reread)
    app.connect("env-get-updated", _decks_to_rewrite)
    app.connect("doctree-resolved", prose_to_notes)
