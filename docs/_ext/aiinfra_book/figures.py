"""Figures drawn by the reference package at build time, in the edition's language.

``.. aiinfra-figure:: expression`` calls a function returning a matplotlib
``Figure`` (from the cache of :mod:`.cache`, like every computed value) and inserts
it as an SVG; the directive's content is the caption.

A figure's words are part of the chapter's catalogue. The directive collects the
strings a reader reads (titles, axis labels, legend entries, annotations, tick labels
that are words; see :func:`~.compute.is_words`) into a :class:`figure_texts` node.
The gettext build extracts them as messages; in the other builds Sphinx's Locale
transform hands the node their translations, and :class:`RenderFigures`, which runs
after it, sets the translated strings on the figure's artists and draws it with a
font that has CJK glyphs. The SVG draws its glyphs as paths: the reader needs no font.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging as std_logging
import os
import pathlib
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.locale import init as init_locale
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.i18n import docname_to_domain

from .compute import (
    cache_for,
    evaluate,
    is_words,
    module_of,
    note_computed,
    resolve_in,
)

logger = logging.getLogger(__name__)

# The Chinese edition's figures draw CJK glyphs from one pinned font that comes with
# the docs environment (the wheel ``pylopdf-fonts-zh-cn``: Noto Sans SC from
# notofonts/noto-cjk, SIL OFL 1.1), so the book builds on a machine without a CJK font
# and draws the same glyphs on every machine. The font file is added to matplotlib's
# font manager explicitly: a font list cached before a font was installed
# (``~/.cache/matplotlib``) cannot hide it. System fonts are a fallback only where the
# wheel is absent (a reader's own environment).
BUNDLED_FONT = ("pylopdf_fonts_zh_cn", "NotoSansSC-Regular.otf")
CJK_FONTS = [
    "Noto Sans SC",
    "WenQuanYi Micro Hei",
    "Noto Sans CJK SC",
    "Source Han Sans SC",
]


class figure_texts(nodes.Element, addnodes.translatable):  # noqa: N801 - docutils style
    """The words of one figure: messages for gettext, translations for drawing."""

    def preserve_original_messages(self) -> None:
        self.setdefault("translations", {})

    def apply_translated_message(self, original: str, translated: str) -> None:
        self.setdefault("translations", {})[original] = translated

    def extract_original_messages(self) -> Sequence[str]:
        return list(self["texts"])


def _is_figure(value: Any) -> bool:
    return type(value).__name__ == "Figure" and hasattr(value, "savefig")


def _artists(figure: Any) -> Iterator[tuple[Any, Any]]:
    """``(text artist, tick axis or None)`` for every string a reader reads: the
    figure's and every sub-figure's titles and free texts, and each axes' texts."""
    figures = [figure]
    while figures:  # the figure, then its sub-figures, theirs, ...
        fig = figures.pop()
        for title in (fig._suptitle, fig._supxlabel, fig._supylabel):
            if title is not None:
                yield title, None
        yield from ((t, None) for t in fig.texts)
        yield from ((t, None) for legend in fig.legends for t in legend.get_texts())
        figures += list(fig.subfigs)
    for ax in figure.axes:  # every axes, sub-figures' included
        yield from ((t, None) for t in (ax.title, ax._left_title, ax._right_title))
        yield from ((t, None) for t in (ax.xaxis.label, ax.yaxis.label))
        yield from ((t, None) for t in ax.texts)
        legend = ax.get_legend()
        if legend is not None:
            yield from ((t, None) for t in legend.get_texts())
            yield legend.get_title(), None
        for axis in (ax.xaxis, ax.yaxis):
            yield from ((t, axis) for t in axis.get_ticklabels())


def figure_strings(figure: Any) -> list[str]:
    """The figure's strings that are words, in drawing order, each once."""
    figure.canvas.draw()  # tick labels exist only once drawn
    names = getattr(figure, "aiinfra_names", frozenset())  # aiinfra.report.mark_names
    seen: dict[str, None] = {}
    for text, _ in _artists(figure):
        s = text.get_text()
        if s and is_words(s) and s not in names:
            seen.setdefault(s, None)
    return list(seen)


def translate_figure(figure: Any, translations: dict[str, str]) -> None:
    """Put the translated strings on the figure's artists (tick labels fixed)."""
    figure.canvas.draw()
    ticks: dict[Any, None] = {}
    for text, axis in _artists(figure):
        if text.get_text() in translations:
            if axis is None:
                text.set_text(translations[text.get_text()])
            else:
                ticks.setdefault(axis, None)
    for axis in ticks:  # a formatter would redraw its own labels: freeze them
        labels = [t.get_text() for t in axis.get_ticklabels()]
        axis.set_ticks(axis.get_ticklocs(), [translations.get(s, s) for s in labels])


def render_svg(figure: Any, translations: dict[str, str], cjk: bool) -> str:
    """The figure as deterministic SVG, its words translated."""
    import matplotlib
    from matplotlib.text import Text

    # The CJK font has no bold face: matplotlib says so for every bold title.
    std_logging.getLogger("matplotlib.font_manager").setLevel(std_logging.ERROR)
    rc = {"svg.hashsalt": "aiinfra-book", "svg.fonttype": "path"}
    with matplotlib.rc_context(rc):
        if cjk:
            # matplotlib falls back glyph by glyph along a text's list of families;
            # a generic family ("sans-serif") is one font, so the list is set here.
            families = [matplotlib.rcParams["font.sans-serif"][0], *cjk_fonts()]
            for text in figure.findobj(Text):
                if text.get_fontfamily() == ["sans-serif"]:
                    text.set_fontfamily(families)
        if translations:
            translate_figure(figure, translations)
        if cjk:
            # A text with $...$ is laid out by mathtext, which draws its words in the
            # first font of the family list only: put the CJK font first there.
            for text in figure.findobj(Text):
                if "$" in text.get_text() and _has_cjk(text.get_text()):
                    text.set_fontfamily([*cjk_fonts(), *text.get_fontfamily()])
        buf = io.StringIO()
        figure.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    return buf.getvalue()


def _has_cjk(text: str) -> bool:
    """Whether ``text`` holds a CJK ideograph or full-width punctuation."""
    return any("\u3000" <= c <= "\u9fff" or "\uff00" <= c <= "\uffef" for c in text)


def bundled_font() -> pathlib.Path | None:
    """The pinned CJK font file of :data:`BUNDLED_FONT`; ``None`` if not installed."""
    import importlib.util

    package, name = BUNDLED_FONT
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / name
    return path if path.is_file() else None


_ADDED: set[str] = set()


def cjk_fonts() -> list[str]:
    """The CJK fonts matplotlib can draw with here, the pinned one first.

    The pinned font (:func:`bundled_font`) is added to the font manager on first
    use; when it is present it is the only one returned, so a figure looks the same
    on every machine. Without it: the system fonts of :data:`CJK_FONTS` that the
    font manager lists.
    """
    from matplotlib import font_manager

    path = bundled_font()
    if path is not None:
        if str(path) not in _ADDED:
            font_manager.fontManager.addfont(str(path))
            _ADDED.add(str(path))
        return [font_manager.get_font(str(path)).family_name]
    names = {f.name for f in font_manager.fontManager.ttflist}
    return [name for name in CJK_FONTS if name in names]


class FigureDirective(SphinxDirective):
    """``.. aiinfra-figure:: expression``: a figure drawn at build time (its target
    and ``:frames:`` as :func:`~.compute.split_target` reads them)."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {
        "alt": directives.unchanged,
        "width": directives.unchanged,
        "frames": directives.unchanged_required,
    }

    def run(self) -> list[nodes.Node]:
        try:
            # The page's module made explicit: the drawing transform and the cache
            # see one name per figure, wherever it is shown.
            target = resolve_in(self, self.arguments[0])
            frames = self.options.get("frames", "").strip()
            frames = resolve_in(self, frames) if frames else ""
            note_computed(self.env, self.config, target)
            if frames:
                note_computed(self.env, self.config, frames)
            # Cached like the figure itself: drawing to find the words costs time.
            texts = cache_for(self.config).get(
                f"figure-strings\0{target}",
                lambda: _strings(self, target),
                module=module_of(target),
            )
            if frames:
                more = cache_for(self.config).get(
                    f"frames-strings\0{frames}",
                    lambda: _strings(self, frames, frames=True),
                    module=module_of(frames),
                )
                texts = list(dict.fromkeys([*texts, *more]))
        except Exception as exc:  # noqa: BLE001
            return [
                self.state_machine.reporter.error(
                    f"aiinfra-figure {self.arguments[0]!r} failed: "
                    f"{type(exc).__name__}: {exc}",
                    line=self.lineno,
                )
            ]
        source, line = self.get_source_info()
        words = figure_texts("", texts=texts, target=target, frames=frames)
        words.source, words.line = source, line
        image = nodes.image(uri="", alt=self.options.get("alt", ""))
        if "width" in self.options:
            image["width"] = self.options["width"]
        fig = nodes.figure("", image, words, classes=["aiinfra-figure"])
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


def _strings(
    directive: SphinxDirective, target: str, frames: bool = False
) -> list[str]:
    """The words of a figure, or of every frame of a list of figures (``frames``);
    ``target`` has its module (:func:`~.compute.resolve`).

    Frames are not kept in the cache (only their words and drawings are): pickling
    dozens of figures costs more than drawing them again.
    """
    docs = pathlib.Path(directive.env.srcdir)
    cache = None if frames else cache_for(directive.config)
    value = evaluate(target, cache, DOCS=docs)
    figures = value if isinstance(value, list) else [value]
    if not figures or not all(_is_figure(f) for f in figures):
        raise TypeError(
            f"expected a matplotlib Figure or a non-empty list of them, got {value!r}"
        )
    try:
        return list(dict.fromkeys(s for f in figures for s in figure_strings(f)))
    finally:
        for f in figures:
            _close(f)


# Figures drawn for the book are read at arm's length; on a slide they fill a box of
# SLIDE_BOX pixels, and their smallest text must then be at least SLIDE_MIN_TEXT_PX
# (18 px of a 1280x720 slide is 27 px on a 1080p projector). Frames (``:frames:``)
# are drawn for a slide already.
SLIDE_BOX = (1180, 530)
SLIDE_MIN_TEXT_PX = 18.0
MAX_TEXT_SCALE = 2.2  # beyond this, text outgrows the boxes a diagram draws it in


def svg_size_px(svg: str) -> tuple[float, float]:
    """The width and height of an SVG drawn by matplotlib (``width="504pt"``)."""
    import re

    w = re.search(r'<svg[^>]*\swidth="([0-9.]+)pt"', svg)
    h = re.search(r'<svg[^>]*\sheight="([0-9.]+)pt"', svg)
    if not (w and h):
        raise ValueError("the SVG gives no width and height in pt")
    return float(w.group(1)) * 96 / 72, float(h.group(1)) * 96 / 72


def slide_text_scale(svg: str) -> float:
    """How much larger a book figure's text must be drawn for a slide.

    The figure is shown scaled by ``k`` to fit :data:`SLIDE_BOX`; its smallest text
    of ``t`` pt is then ``t * 96/72 * k`` px, which must reach
    :data:`SLIDE_MIN_TEXT_PX`. Capped at :data:`MAX_TEXT_SCALE`.
    """
    width, height = svg_size_px(svg)
    k = min(SLIDE_BOX[0] / width, SLIDE_BOX[1] / height)
    smallest = min_text_pt(svg) * 96 / 72 * k
    if smallest <= 0 or smallest >= SLIDE_MIN_TEXT_PX:
        return 1.0
    return min(MAX_TEXT_SCALE, SLIDE_MIN_TEXT_PX / smallest * 1.1)


def enlarge_text(figure: Any, scale: float) -> None:
    """Draw every text of a figure ``scale`` times larger (for a slide)."""
    from matplotlib.text import Text

    figure.canvas.draw()
    ticks = set()
    for ax in figure.axes:
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            labels = axis.get_ticklabels()
            ticks |= set(map(id, labels))
            if labels:
                ax.tick_params(axis=name, labelsize=labels[0].get_fontsize() * scale)
    for text in figure.findobj(Text):
        if id(text) not in ticks:
            text.set_fontsize(text.get_fontsize() * scale)


def _text_class(svg: str) -> str:
    """``text-pt-9``: the figure's smallest text, for the decks' legibility test."""
    return f"text-pt-{min_text_pt(svg):.1f}"


def min_text_pt(svg: str) -> float:
    """The smallest text of an SVG drawn by :func:`render_svg`, in points.

    matplotlib draws a glyph path at 100 units per point of font size
    (``TextToPath.FONT_SCALE``), so each text group's ``scale(s -s)`` is size/100.
    """
    import re

    sizes = [float(s) * 100 for s in re.findall(r"scale\(([0-9.]+) -[0-9.]+\)", svg)]
    return min(sizes, default=0.0)


def _close(figure: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(figure)


class RenderFigures(SphinxTransform):
    """Draw each figure in the edition's language, after Locale (priority 20)."""

    default_priority = 25

    def apply(self, **kwargs: Any) -> None:
        if self.env._builder_cls.name == "gettext":
            return  # the figure_texts nodes are its messages; nothing is drawn
        lang = self.config.language or "en"
        cjk = self.config.aiinfra_cjk  # docs/languages.toml
        for words in list(self.document.findall(figure_texts)):
            try:
                self._render(words, lang, cjk)
            except Exception as exc:  # noqa: BLE001 - reported as a build error
                logger.warning(
                    "aiinfra-figure %r failed to draw: %s: %s",
                    words["target"],
                    type(exc).__name__,
                    exc,
                    location=words,
                )
                words.parent.remove(words)

    def _translations(self, texts: Sequence[str]) -> dict[str, str]:
        """Each of the figure's words that the chapter's catalogue translates.

        Read from the catalogue here rather than through Sphinx's Locale transform:
        that transform handles one node's messages as one, and skips them all as
        soon as one of them is translated as itself (``all-reduce``, ``torch``).
        """
        if not self.config.language or self.config.language == "en":
            return {}
        domain = docname_to_domain(
            self.env.current_document.docname, self.config.gettext_compact
        )
        dirs = [pathlib.Path(self.env.srcdir) / d for d in self.config.locale_dirs]
        catalog, found = init_locale(dirs, self.config.language, domain)
        if not found:
            return {}
        pairs = ((t, catalog.gettext(t)) for t in texts)
        return {t: s for t, s in pairs if s and s != t}

    def _write(self, svg: str, lang: str, key: str) -> str:
        """Write an SVG under the figure folder; its URI for an image node."""
        folder = pathlib.Path(self.config.aiinfra_figure_dir) / lang
        name = hashlib.sha256(key.encode()).hexdigest()[:16] + ".svg"
        path = folder / name
        folder.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != svg:
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(svg)
            os.replace(tmp, path)  # atomic: the other builds may read it now
        # Absolute URIs are relative to the source folder; the figure lives in build/.
        return "/" + os.path.relpath(path, self.env.srcdir).replace(os.sep, "/")

    def _render(self, words: figure_texts, lang: str, cjk: bool) -> None:
        translations = self._translations(words["texts"])
        if cjk and not cjk_fonts():
            logger.warning(
                "no CJK font for the figures of the Chinese edition: install the "
                "docs extra (pip install -e '.[docs]': it pins the font package %s) "
                "or a system font, one of %s",
                BUNDLED_FONT[0].replace("_", "-"),
                ", ".join(CJK_FONTS),
                location=words,
            )
        target = words["target"]
        cache = cache_for(self.config)
        deck = self.env._builder_cls.name == "revealjs"
        frames = words.get("frames", "") if deck else ""
        docs = pathlib.Path(self.env.srcdir)
        fonts = cjk_fonts() if cjk else []

        def draw(scale: float = 1.0) -> str:
            figure = evaluate(target, cache, DOCS=docs)
            try:
                if scale != 1.0:
                    enlarge_text(figure, scale)
                return render_svg(figure, translations, cjk)
            finally:
                _close(figure)

        def draw_for_slide() -> str:
            # The book's drawing (cached: the book build of this language shares
            # it) says how much larger the text must be; larger text grows the
            # figure, so the result is measured again.
            svg = cache.get(f"figure-svg\0{book_key}", draw, module=module_of(target))
            scale = 1.0
            for _ in range(3):
                more = slide_text_scale(svg)
                if more == 1.0 or scale >= MAX_TEXT_SCALE:
                    break
                scale = min(MAX_TEXT_SCALE, scale * more)
                svg = draw(scale)
            return svg

        def draw_frames() -> list[str]:
            figures = evaluate(frames, None, DOCS=docs)  # not pickled: drawn once
            try:
                return [render_svg(f, translations, cjk) for f in figures]
            finally:
                for f in figures:
                    _close(f)

        # The drawn SVG is cached too, per language and translation: the book and
        # the decks of one language draw each figure once.
        drawing = [target, lang, sorted(translations.items()), fonts]
        book_key, key = json.dumps([*drawing, False]), json.dumps([*drawing, deck])
        image = words.parent.next_node(nodes.image)
        if frames:
            key = json.dumps([frames, lang, sorted(translations.items()), fonts])
            svgs = cache.get(
                f"frames-svg\0{key}", draw_frames, module=module_of(frames)
            )
            stack = nodes.container("", classes=["r-stack", "deck-frames"])
            for k, svg in enumerate(svgs):
                frame = nodes.image(
                    uri=self._write(svg, lang, f"{frames}\0{k}"),
                    alt=f"{image.get('alt', '')} ({k + 1}/{len(svgs)})",
                    classes=["deck-frame"] + (["fragment"] if k else []),
                )
                frame["classes"].append(_text_class(svg))
                stack += frame
            image.parent.replace(image, stack)
        else:
            svg = cache.get(
                f"figure-svg\0{key}",
                draw_for_slide if deck else draw,
                module=module_of(target),
            )
            image["uri"] = self._write(svg, lang, target + ("\0deck" if deck else ""))
            if deck:
                image["classes"].append(_text_class(svg))
        words.parent.remove(words)


def setup(app: Sphinx) -> None:
    root = pathlib.Path(app.confdir).parent
    app.add_config_value("aiinfra_figure_dir", str(root / "build" / "figures"), "")
    app.add_node(figure_texts)
    app.add_directive("aiinfra-figure", FigureDirective)
    app.add_transform(RenderFigures)
