"""A Jupyter notebook per page of a chapter, in the edition's language.

The HTML build writes ``<chapter>/<page>.ipynb`` beside ``<chapter>/<page>.html``
(and ``downloads/aiinfra-notebooks-<lang>.zip`` with all of them) from the page's
resolved doctree, so the notebook says what the page says, in the same language,
from the same source, and costs the build no second reading:

- prose is Markdown: math as ``$...$``, citations as the page prints them
  (author-year), links to the online pages (``aiinfra_site_url``, else relative to
  the notebook's place in the site);
- a listing (``literalinclude`` of the package) is a cell that imports the object
  from ``aiinfra`` and shows its source (:func:`.notebook_code.show_source`), never a
  copy of it;
- the values a paragraph computes (``:calc:``) are a cell after it that computes and
  prints them; a table (``aiinfra-table``) and a figure (``aiinfra-figure``) are cells
  that compute and draw them, their words in the edition's language (``WORDS``);
- the chapter's example (the ``runnable`` console block of its index page) is a cell
  that runs it.

The notebooks are written with ``nbformat`` (version 4, validated), cell ids derived
from the page so that an unchanged page writes the same bytes; they are not executed
here (``tests/book/test_notebooks.py`` executes every one with nbclient).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import json
import os
import pathlib
import posixpath
import re
import zipfile
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.locale import init as init_locale
from sphinx.util import logging
from sphinx.util.i18n import docname_to_domain

from . import calculators, compute, editions, figures, links, notebook_code, questions
from .chapters import chapters
from .languages import label

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------- the directives
# Each directive whose output becomes a code cell records what the cell must call:
# the rendered nodes hold only the result (a number, an SVG, the listing's text).


class NotebookTable(compute.TableDirective):
    """``aiinfra-table`` that records its target (module explicit) on the table."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        for node in result:
            if isinstance(node, nodes.table):
                node["aiinfra_target"] = compute.resolve_in(self, self.arguments[0])
        return result


class NotebookFigure(figures.FigureDirective):
    """``aiinfra-figure`` that records its target on the figure node (the drawing
    transform removes the node that held it)."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        for node in result:
            if isinstance(node, nodes.figure):
                words = next(iter(node.findall(figures.figure_texts)), None)
                if words is not None:
                    node["aiinfra_target"] = words["target"]
        return result


_INCLUDE_OPTIONS = ("start-after", "start-at", "end-before", "end-at", "dedent")


class NotebookLiteralInclude(links.SourcedLiteralInclude):
    """``literalinclude`` that records what it quotes on its literal block."""

    def run(self) -> list[nodes.Node]:
        result = super().run()
        block = next((n for r in result for n in r.findall(nodes.literal_block)), None)
        if block is None:
            return result
        _, abspath = self.env.relfn2path(self.arguments[0])
        path = pathlib.Path(abspath).resolve()
        root = pathlib.Path(self.env.srcdir).resolve().parent
        package = pathlib.Path(self.config.aiinfra_package_dir).resolve()
        include: dict[str, Any] = {
            k: self.options[k] for k in _INCLUDE_OPTIONS if k in self.options
        }
        if package in path.parents and path.suffix == ".py":
            parts = path.relative_to(package.parent).with_suffix("").parts
            include["module"] = ".".join(p for p in parts if p != "__init__")
            include["pyobject"] = self.options.get("pyobject", "")
        else:
            include["path"] = path.relative_to(root).as_posix()
        include["language"] = block.get("language", "python")
        block["aiinfra_include"] = include
        return result


# ---------------------------------------------------------------- the code cells


def names_of(expression: str) -> list[str]:
    """The free names of a Python expression, in order (builtins left out)."""
    tree = ast.parse(expression.strip(), mode="eval")
    bound = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Lambda):
            bound |= {a.arg for a in n.args.args}
    found: dict[str, None] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            if n.id not in bound and not hasattr(builtins, n.id):
                found.setdefault(n.id, None)
    return list(found)


def imports(targets: list[str]) -> list[str]:
    """``from module import a, b`` lines for resolved targets (``module:expr``)."""
    wanted: dict[str, dict[str, None]] = {}
    for target in targets:
        module, expression = compute.split_target(target)
        for name in names_of(expression):
            wanted.setdefault(module, {}).setdefault(name, None)
    return [
        f"from {module} import {', '.join(names)}"
        for module, names in wanted.items()
        if names
    ]


def listing_cell(include: dict[str, Any]) -> str:
    """A code cell that shows a listing from the package (or the repository)."""
    args: list[str] = []
    lines: list[str] = []
    if "module" in include:
        obj = include.get("pyobject", "")
        if obj:
            top = obj.split(".")[0]
            lines.append(f"from {include['module']} import {top}")
            args.append(obj)
        else:
            args.append(repr(include["module"]))
    else:
        args.append(repr(include["path"]))
    for option in _INCLUDE_OPTIONS:
        if option in include:
            value = include[option]
            if option == "dedent":  # no value: as much as every line allows
                value = "auto" if value is None else int(value)
            else:
                value = str(value)
            args.append(f"{option.replace('-', '_')}={value!r}")
    if include.get("language", "python") != "python":
        args.append(f"language={include['language']!r}")
    lines.append(f"show_source({', '.join(args)})")
    return "\n".join(lines)


def setup_cell(words: dict[str, str], cjk: bool, example: bool) -> str:
    """The first code cell: the helpers (their source, from
    :mod:`.notebook_code` and :func:`.compute.format_value`) and the edition's
    words (``WORDS``: English -> this edition, for tables and figures)."""
    helpers = [
        compute.format_value,
        notebook_code.show_source,
        notebook_code.show_table,
        notebook_code.show_figure,
    ]
    if cjk:
        helpers.append(notebook_code.use_cjk_font)
    if example:
        helpers.append(notebook_code.run_example)
    table = json.dumps(words, ensure_ascii=False, indent=0, sort_keys=True)
    head = (
        "# The book's package (pip install -e '.[docs]' in the book's repository)\n"
        "# and the helpers that show its listings, values, tables and figures as\n"
        "# the page does.\n"
        "%matplotlib inline\n"
        "from typing import Any\n\n"
        f"WORDS = {table}\n"
    )
    source = "\n\n".join(inspect.getsource(f).rstrip() for f in helpers)
    tail = "\n\nfmt = format_value\n" + ("use_cjk_font()\n" if cjk else "")
    return f"{head}\n\n{source}{tail}"


# ---------------------------------------------------------------- Markdown

_ESCAPE = re.compile(r"([\\`*$<>\[\]])")


def escape(text: str) -> str:
    """Plain text as Markdown that Jupyter shows as it is (no math, no HTML)."""
    return _ESCAPE.sub(r"\\\1", text)


class NotebookWriter:
    """Turns one page's resolved doctree into notebook cells (module docstring)."""

    def __init__(self, app: Sphinx, docname: str, doctree: nodes.document) -> None:
        self.app = app
        self.docname = docname
        self.doctree = doctree
        self.lang = app.config.language or "en"
        self.module = compute.page_module(docname)
        self.cells: list[tuple[str, str, dict]] = []
        self.prose: list[str] = []
        self.calcs: list[tuple[str, str]] = []  # (target, spec) of pending values
        self.words: dict[str, str] = {}
        self.example = False
        self.in_question = 0

    # -- cells
    def flush(self) -> None:
        text = "\n\n".join(p for p in self.prose if p.strip())
        if text.strip():
            self.cells.append(("markdown", text, {}))
        self.prose = []
        if self.calcs:
            targets = [t for t, _ in self.calcs]
            body = imports(targets) + [
                f"print(fmt({compute.split_target(t)[1]}, {spec!r}))"
                for t, spec in self.calcs
            ]
            meta: dict[str, Any] = {"tags": ["values"]}
            if self.in_question:  # an answer's values: folded, like the answer
                meta["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
            self.cells.append(("code", "\n".join(body), meta))
            self.calcs = []

    def code(self, source: str, tags: tuple[str, ...] = ()) -> None:
        self.flush()
        self.cells.append(("code", source, {"tags": list(tags)} if tags else {}))

    # -- links
    def page_url(self, docname: str) -> str:
        site = self.app.config.aiinfra_site_url.rstrip("/")
        if site:
            return f"{site}/{self.lang}/{docname}.html"
        return posixpath.relpath(f"{docname}.html", posixpath.dirname(self.docname))

    def link(self, refuri: str) -> str:
        site = self.app.config.aiinfra_site_url.rstrip("/")
        if not site or re.match(r"[a-z]+:", refuri):
            return refuri
        base = f"{site}/{self.lang}/{self.docname}.html"
        import urllib.parse

        return urllib.parse.urljoin(base, refuri)

    # -- inline
    def inline(self, node: nodes.Node) -> str:
        if isinstance(node, nodes.Text):
            return escape(str(node).replace("\n", " "))
        if isinstance(node, nodes.math):
            return f"${node.astext()}$"
        if isinstance(node, nodes.literal):
            text = node.astext().replace("\n", " ")
            ticks = "``" if "`" in text else "`"
            return f"{ticks}{text}{ticks}"
        if isinstance(node, nodes.inline) and "calc" in node.get("classes", []):
            self.calc(node)
            return escape(node.astext())
        inner = "".join(self.inline(c) for c in node.children)
        if isinstance(node, nodes.emphasis):
            return f"*{inner}*" if inner.strip() else inner
        if isinstance(node, nodes.strong):
            return f"**{inner}**" if inner.strip() else inner
        if isinstance(node, nodes.reference) and node.get("refuri"):
            return f"[{inner}]({self.link(node['refuri'])})"
        if isinstance(node, nodes.image | nodes.target | nodes.system_message):
            return ""
        return inner

    def calc(self, node: nodes.inline) -> None:
        raw = node.rawsource
        m = re.fullmatch(r":calc:`(.*)`", raw, re.S)
        if not m:
            return
        text = m[1].replace("\\\\", "\\")
        target, _, spec = text.rpartition("|")
        if not target:
            target, spec = text, ""
        self.calcs.append((compute.resolve(target, self.module), spec.strip()))

    def inlines(self, node: nodes.Node) -> str:
        return "".join(self.inline(c) for c in node.children).strip()

    # -- blocks
    def blocks(self, node: nodes.Node) -> str:
        """The Markdown of a node's block children (nested lists, answers)."""
        return "\n\n".join(b for c in node.children if (b := self.block(c)))

    def block(self, node: nodes.Node) -> str:  # noqa: C901 - one case per node
        if isinstance(node, nodes.paragraph):
            if "aiinfra-table-note" in node.get("classes", []):
                return ""  # show_table prints the note and the stamp
            return self.inlines(node)
        if isinstance(node, nodes.bullet_list | nodes.enumerated_list):
            items = []
            for i, item in enumerate(node.children, 1):
                mark = "-" if isinstance(node, nodes.bullet_list) else f"{i}."
                text = self.blocks(item).replace("\n", "\n   ")
                items.append(f"{mark} {text}")
            return "\n".join(items)
        if isinstance(node, nodes.math_block):
            return f"$$\n{node.astext().strip()}\n$$"
        if isinstance(node, nodes.literal_block):
            lang = node.get("language", "")
            lang = "" if lang in ("default", "none") else lang
            return f"```{lang}\n{node.astext()}\n```"
        if isinstance(node, nodes.admonition | nodes.Admonition):
            title = next(iter(node.findall(nodes.title)), None)
            head = f"**{self.inlines(title)}**\n\n" if title is not None else ""
            body = "\n\n".join(
                b
                for c in node.children
                if not isinstance(c, nodes.title)
                if (b := self.block(c))
            )
            return "\n".join(
                f"> {line}" if line else ">" for line in (head + body).split("\n")
            )
        if isinstance(node, questions.aiinfra_question):
            text = label("question", self.lang, n=node["number"])
            self.in_question += 1
            return f"**{escape(text)}**\n\n{self.blocks(node)}"
        if isinstance(node, questions.aiinfra_answer):
            summary = label("answer", self.lang)
            return (
                f"<details><summary>{summary}</summary>\n\n{self.blocks(node)}"
                "\n\n</details>"
            )
        if isinstance(node, nodes.table):
            return self.table(node)
        if isinstance(node, nodes.definition_list):
            return "\n\n".join(
                f"**{self.inlines(item[0])}**  \n{self.blocks(item[-1])}"
                for item in node.children
            )
        if isinstance(node, nodes.block_quote | nodes.line_block):
            return "\n".join(f"> {line}" for line in self.blocks(node).split("\n"))
        if isinstance(node, nodes.line):
            return self.inlines(node)
        if isinstance(node, nodes.rubric):
            return f"**{self.inlines(node)}**"
        if isinstance(
            node,
            nodes.comment
            | nodes.target
            | nodes.substitution_definition
            | nodes.system_message
            | nodes.raw
            | calculators.aiinfra_calculator  # the site's only: it runs in the page
            | addnodes.index
            | nodes.meta,
        ):
            return ""
        if isinstance(node, nodes.Element):
            return self.blocks(node)
        return escape(node.astext())

    def table(self, node: nodes.table) -> str:
        rows = [
            [
                self.inlines(entry).replace("\n", " ").replace("|", "\\|") or " "
                for entry in row.children
            ]
            for row in node.findall(nodes.row)
        ]
        if not rows:
            return ""
        width = max(len(r) for r in rows)
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        title = next(iter(node.findall(nodes.title)), None)
        head = f"*{self.inlines(title)}*\n\n" if title is not None else ""
        return head + "\n".join(lines)

    # -- the flow of a page
    def flow(self, node: nodes.Node, depth: int = 0) -> None:
        for child in node.children:
            if isinstance(child, nodes.section):
                self.flush()
                title = child.next_node(nodes.title)
                self.prose.append(f"{'#' * min(depth + 1, 6)} {self.inlines(title)}")
                self.flow(child, depth + 1)
            elif isinstance(child, nodes.title):
                continue
            elif isinstance(child, nodes.figure) and child.get("aiinfra_target"):
                self.figure(child)
            elif isinstance(child, nodes.table) and child.get("aiinfra_target"):
                self.computed_table(child)
            elif self._include(child) is not None:
                self.listing(child)
            elif isinstance(child, nodes.literal_block) and "runnable" in child.get(
                "classes", []
            ):
                self.runnable(child)
            elif isinstance(child, nodes.compound) and "toctree-wrapper" in child.get(
                "classes", []
            ):
                self.prose.append(self.toctree(child))
            elif isinstance(child, questions.aiinfra_question):
                self.prose.append(self.block(child))
                self.flush()
                self.in_question -= 1
            elif isinstance(child, nodes.container) and not isinstance(
                child, nodes.literal_block
            ):
                self.flow(child, depth)
            else:
                text = self.block(child)
                if text:
                    self.prose.append(text)
                if self.calcs:
                    self.flush()

    def _include(self, node: nodes.Node) -> dict | None:
        if isinstance(node, nodes.literal_block):
            return node.get("aiinfra_include")
        if isinstance(node, nodes.container) and "aiinfra-listing" in node.get(
            "classes", []
        ):
            block = node.next_node(nodes.literal_block)
            return block.get("aiinfra_include") if block is not None else None
        return None

    def listing(self, node: nodes.Node) -> None:
        caption = next(iter(node.findall(nodes.caption)), None)
        if caption is not None:
            self.prose.append(f"*{self.inlines(caption)}*")
        include = self._include(node)
        tag = "listing" if "module" in include else "listing-file"
        self.code(listing_cell(include), (tag,))

    def figure(self, node: nodes.figure) -> None:
        target = node["aiinfra_target"]
        self.collect_words(target, figure=True)
        module, expression = compute.split_target(target)
        self.code(
            "\n".join([*imports([target]), f"show_figure({expression})"]), ("figure",)
        )
        caption = next(iter(node.findall(nodes.caption)), None)
        legend = next(iter(node.findall(nodes.legend)), None)
        text = self.inlines(caption) if caption is not None else ""
        more = self.blocks(legend) if legend is not None else ""
        self.prose.append(
            "\n\n".join(t for t in (f"*{text}*" if text else "", more) if t)
        )
        if self.calcs:
            self.flush()

    def computed_table(self, node: nodes.table) -> None:
        target = node["aiinfra_target"]
        self.collect_words(target, figure=False)
        title = next(iter(node.findall(nodes.title)), None)
        if title is not None:
            self.prose.append(f"*{self.inlines(title)}*")
        _, expression = compute.split_target(target)
        self.code(
            "\n".join([*imports([target]), f"show_table({expression})"]), ("table",)
        )

    def runnable(self, node: nodes.literal_block) -> None:
        self.prose.append(self.block(node))
        commands = [
            line.strip()[2:]
            for line in node.astext().splitlines()
            if line.strip().startswith("$ ")
        ]
        self.example = True
        self.code("\n".join(f"run_example({c!r})" for c in commands), ("example",))

    def toctree(self, node: nodes.compound) -> str:
        """The chapter's sections: each page and its notebook."""
        items = []
        for ref in node.findall(nodes.reference):
            uri = ref.get("refuri", "")
            if not uri or "#" in uri:
                continue
            notebook = uri.rsplit(".", 1)[0] + ".ipynb"
            title = escape(ref.astext())
            items.append(f"- [{title}]({self.link(uri)}) · [{notebook}]({notebook})")
        return "\n".join(items)

    # -- the words of the edition
    def collect_words(self, target: str, figure: bool) -> None:
        """The catalogue's translations of a table's or figure's words."""
        if self.lang == compute_source_lang(self.app):
            return
        cache = compute.cache_for(self.app.config)
        module = compute.module_of(target)
        if figure:
            texts = cache.get(
                f"figure-strings\0{target}",
                lambda: _figure_strings(self.app, target),
                module=module,
            )
        else:
            table = compute.evaluate(target, cache)
            texts = [*table.columns, table.note]
            texts += [
                compute.format_value(v, "") if not isinstance(v, float) else ""
                for row in table.rows
                for i, v in enumerate(row)
                if i in table.words and isinstance(v, str)
            ]
        domain = docname_to_domain(self.docname, self.app.config.gettext_compact)
        dirs = [pathlib.Path(self.app.srcdir) / d for d in self.app.config.locale_dirs]
        catalog, found = init_locale(dirs, self.lang, domain)
        if not found:
            return
        for text in texts:
            if text and (translated := catalog.gettext(text)) and translated != text:
                self.words[text] = translated

    # -- the notebook
    def notebook(self) -> Any:
        import nbformat
        from nbformat import v4

        cjk = bool(self.app.config.aiinfra_cjk)
        title = self.doctree.next_node(nodes.title)
        heading = self.inlines(title) if title is not None else self.docname
        self.flow(self.doctree)
        self.flush()
        intro = label(
            "notebook_intro",
            self.lang,
            page=f"[{heading}]({self.page_url(self.docname)})",
            book=self.app.config.html_title or self.app.config.project,
        )
        cells = [
            ("markdown", f"*{intro}*", {}),
            (
                "code",
                setup_cell(self.words, cjk, self.example),
                {"tags": ["setup"], "jupyter": {"source_hidden": True}},
            ),
            *self.cells,
        ]
        nb = v4.new_notebook()
        nb.metadata = {
            "kernelspec": {
                "display_name": "Python 3",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
            "aiinfra": {"page": self.docname, "language": self.lang},
        }
        for i, (kind, source, meta) in enumerate(cells):
            new = v4.new_markdown_cell if kind == "markdown" else v4.new_code_cell
            cell = new(source, metadata=meta)
            digest = hashlib.sha1(f"{self.docname}\0{i}".encode()).hexdigest()[:12]
            cell["id"] = f"c{i:03d}-{digest}"
            nb.cells.append(cell)
        nbformat.validate(nb)
        return nb


def compute_source_lang(app: Sphinx) -> str:
    from . import languages

    docs = pathlib.Path(app.srcdir)
    if (docs / languages.FILE).is_file():
        return languages.source(languages.load(docs))
    return "en"


def _figure_strings(app: Sphinx, target: str) -> list[str]:
    figure = compute.evaluate(target, compute.cache_for(app.config))
    try:
        return figures.figure_strings(figure)
    finally:
        figures._close(figure)


# ---------------------------------------------------------------- writing


def book_chapters(app: Sphinx) -> list[str]:
    """The book's chapters; none for a project without a ``chapters`` toctree
    (the extension used on its own)."""
    try:
        return chapters(pathlib.Path(app.srcdir), app.config.root_doc)
    except (ValueError, OSError):
        return []


def in_chapter(app: Sphinx, docname: str) -> bool:
    chapter, sep, _ = docname.partition("/")
    return bool(sep) and chapter in book_chapters(app)


def _write_atomic(path: pathlib.Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def write_notebook(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved of the HTML build: the page's notebook beside the page."""
    if app.builder.name != "html" or not in_chapter(app, docname):
        return
    import nbformat

    nb = NotebookWriter(app, docname, doctree).notebook()
    text = nbformat.writes(nb, version=4) + "\n"
    _write_atomic(pathlib.Path(app.outdir) / f"{docname}.ipynb", text.encode())


def generator_stamp(app: Sphinx) -> str:
    """What every notebook depends on besides its page: the code that writes it
    (this module, the helpers, the value format) and the edition's labels."""
    here = pathlib.Path(__file__).parent
    h = hashlib.sha256()
    for name in ("notebooks.py", "notebook_code.py", "compute.py", "languages.py"):
        h.update((here / name).read_bytes())
    lang = app.config.language or "en"
    labels = pathlib.Path(app.srcdir) / "locale" / lang / "LC_MESSAGES" / "labels.po"
    if labels.is_file():
        h.update(labels.read_bytes())
    return h.hexdigest()


def rewrite_all(app: Sphinx) -> None:
    """After a change of the code that writes notebooks, write every page's
    notebook again (an incremental build writes only the pages that changed)."""
    stamp_file = pathlib.Path(app.doctreedir) / "notebooks-stamp"
    stamp = generator_stamp(app)
    if stamp_file.is_file() and stamp_file.read_text() == stamp:
        return
    for docname in sorted(app.env.found_docs):
        if in_chapter(app, docname):
            app.env.get_and_resolve_doctree(docname, app.builder)  # writes it
    stamp_file.write_text(stamp)


def _zip(target: pathlib.Path, folder: str, files: dict[str, bytes]) -> None:
    """A zip of ``files`` under ``folder/``, with fixed dates: an unchanged book
    writes the same bytes (and the file is left alone)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(f"{folder}/{name}", (2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    if target.exists() and target.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        os.replace(tmp, target)


def write_zip(app: Sphinx, exception: Exception | None) -> None:
    """build-finished of the HTML build: the edition's notebooks in one zip, and
    each chapter's in one zip of its own."""
    if exception is not None or app.builder.name != "html":
        return
    out = pathlib.Path(app.outdir)
    lang = app.config.language or "en"
    rewrite_all(app)
    every: dict[str, bytes] = {}
    for chapter in book_chapters(app):
        files = {
            p.relative_to(out).as_posix(): p.read_bytes()
            for p in sorted((out / chapter).glob("*.ipynb"))
        }
        if files:
            _zip(
                out.parent / editions.chapter_notebooks_zip(chapter, lang),
                f"aiinfra-notebooks-{lang}",
                files,
            )
        every.update(files)
    if every:
        _zip(
            out.parent / editions.notebooks_zip(lang),
            f"aiinfra-notebooks-{lang}",
            every,
        )


def page_context(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    """The page's *Download notebook* button (a page of a chapter)."""
    if app.builder.name != "html":
        return
    lang = app.config.language or "en"
    context["aiinfra_notebook_label"] = label("notebook", lang)
    context["aiinfra_notebook_url"] = (
        posixpath.basename(pagename) + ".ipynb" if in_chapter(app, pagename) else ""
    )


def setup(app: Sphinx) -> None:
    app.add_config_value(
        "aiinfra_site_url", os.environ.get("AIINFRA_SITE_URL", ""), "env", types=[str]
    )
    app.add_directive("aiinfra-table", NotebookTable, override=True)
    app.add_directive("aiinfra-figure", NotebookFigure, override=True)
    app.add_directive("literalinclude", NotebookLiteralInclude, override=True)
    app.connect("doctree-resolved", write_notebook)
    app.connect("build-finished", write_zip)
    app.connect("html-page-context", page_context)
