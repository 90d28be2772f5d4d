"""The helpers a book notebook defines in its first code cell.

:mod:`.notebooks` copies the source of these functions into every notebook (with
:func:`inspect.getsource`), so a notebook needs nothing but the ``aiinfra`` package
and IPython, and the helpers are tested here, once. Each is self-contained: it
imports what it uses inside its body, and uses no name of this module but the
notebook's ``WORDS`` (the edition's translations of table and figure words; empty in
the source language).
"""

from __future__ import annotations

from typing import Any

WORDS: dict[str, str] = {}


def show_source(
    target: Any,
    start_after: str = "",
    start_at: str = "",
    end_before: str = "",
    end_at: str = "",
    dedent: int | str = 0,
    language: str = "python",
) -> None:
    """Show a listing of the book from the code itself, never from a copy.

    ``target`` is an object of the package (a function, a class, a method) or the
    dotted name of one of its modules, or a path of the book's repository
    (``deploy/Dockerfile``); the markers cut a region out of a module's or file's
    text as the book's ``literalinclude`` does.
    """
    import importlib
    import inspect
    import pathlib
    import textwrap

    from IPython.display import Code, display

    if isinstance(target, str) and "/" in target:
        import aiinfra

        root = pathlib.Path(aiinfra.__file__).resolve().parents[2]
        text = (root / target).read_text(encoding="utf-8")
    elif isinstance(target, str):
        text = inspect.getsource(importlib.import_module(target))
    else:
        # a property, a compiled kernel (Triton's JITFunction), a wrapper: the
        # function inside
        while not (inspect.isroutine(target) or inspect.isclass(target)):
            inner = getattr(target, "fget", None) or getattr(target, "fn", None)
            target = inner or target.__wrapped__
        text = inspect.getsource(target)  # a method keeps its class's indent
    lines = text.splitlines()
    for marker, after in ((start_after, True), (start_at, False)):
        if marker:
            first = next(i for i, line in enumerate(lines) if marker in line)
            lines = lines[first + 1 if after else first :]
    for marker, before in ((end_before, True), (end_at, False)):
        if marker:
            last = next(i for i, line in enumerate(lines) if marker in line)
            lines = lines[: last if before else last + 1]
    if dedent == "auto":
        lines = textwrap.dedent("\n".join(lines)).splitlines()
    elif dedent:
        lines = [line[dedent:] for line in lines]
    display(Code("\n".join(lines).strip("\n"), language=language))


def show_table(table: Any) -> None:
    """Show a table of the book (an ``aiinfra.report.Table``) as the page does:
    its words in the notebook's language, its note and stamp below it."""
    from aiinfra.report import format_cell
    from IPython.display import Markdown, display

    def cell(text: str) -> str:
        return WORDS.get(text, text).replace("|", "\\|")

    lines = [
        "| " + " | ".join(cell(c) for c in table.columns) + " |",
        "|" + "---|" * len(table.columns),
    ]
    for row in table.rows:
        cells = [
            cell(format_cell(v)) if i in table.words else format_cell(v)
            for i, v in enumerate(row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    for text in (WORDS.get(table.note, table.note), table.stamp):
        if text:
            lines += ["", f"*{text}*"]
    display(Markdown("\n".join(lines)))


def show_figure(figure: Any) -> None:
    """Draw a figure of the book, its words in the notebook's language."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    figure.canvas.draw()  # tick labels exist once drawn
    ticks: dict[Any, None] = {}
    texts = [figure._suptitle] if figure._suptitle is not None else []
    for ax in figure.axes:
        texts += [ax.title, ax._left_title, ax._right_title]
        texts += [ax.xaxis.label, ax.yaxis.label, *ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += [*legend.get_texts(), legend.get_title()]
        for axis in (ax.xaxis, ax.yaxis):
            if any(t.get_text() in WORDS for t in axis.get_ticklabels()):
                ticks.setdefault(axis, None)
    for legend in figure.legends:
        texts += legend.get_texts()
    for text in texts:
        if text.get_text() in WORDS:
            text.set_text(WORDS[text.get_text()])
    for axis in ticks:
        labels = [t.get_text() for t in axis.get_ticklabels()]
        axis.set_ticks(axis.get_ticklocs(), [WORDS.get(s, s) for s in labels])
    display(figure)
    plt.close(figure)


def use_cjk_font() -> None:
    """Draw figures with a font that has Chinese glyphs: the book's pinned Noto
    Sans SC where installed (the ``docs`` extra), else a system CJK font."""
    import importlib.util
    import pathlib

    import matplotlib
    from matplotlib import font_manager

    spec = importlib.util.find_spec("pylopdf_fonts_zh_cn")
    families = []
    if spec is not None and spec.submodule_search_locations:
        folder = pathlib.Path(next(iter(spec.submodule_search_locations)))
        path = folder / "NotoSansSC-Regular.otf"
        if path.is_file():
            font_manager.fontManager.addfont(str(path))
            families.append(font_manager.get_font(str(path)).family_name)
    have = {f.name for f in font_manager.fontManager.ttflist}
    families += [
        name
        for name in ("Noto Sans CJK SC", "WenQuanYi Micro Hei", "Source Han Sans SC")
        if name in have
    ]
    # A list of families: matplotlib falls back glyph by glyph along it.
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", *families]


def run_example(command: str) -> None:
    """Run the chapter's example command as the book prints it, with this
    notebook's Python (``aiinfra ...`` is ``python -m aiinfra.cli ...``)."""
    import shlex
    import subprocess
    import sys

    argv = shlex.split(command)
    if argv[0] == "aiinfra":
        argv = [sys.executable, "-m", "aiinfra.cli", *argv[1:]]
    elif argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    print(proc.stdout, end="")
    if proc.returncode:
        raise RuntimeError(f"$ {command}: exit {proc.returncode}\n{proc.stderr}")
