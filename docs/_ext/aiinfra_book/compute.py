"""Values and tables computed by the reference package at build time.

- ``:calc:`expression|format``` evaluates ``expression`` in the namespace of the
  page's own module (:func:`page_module`: ``docs/models/flash_attention.rst`` ->
  ``aiinfra.book.models.flash_attention``) and inserts the formatted value, so prose
  cannot drift from the code. ``:calc:`aiinfra.x.y:expression``` evaluates it in
  another module of the package (:func:`split_target`): a value of another page.
- ``.. aiinfra-table:: expression`` renders an :class:`aiinfra.report.Table`; an
  expression that gives ``None`` renders nothing (a GPU's results, shown only
  where a stamped GPU file exists: :func:`aiinfra.results.load_optional`).
  What a reader reads as words is translatable: the caption, the column headers, the
  cells of the table's ``words`` columns (the row labels by default) that are words
  (:func:`is_words`) and the table's ``note``. Numbers and the computed ``stamp``
  (a date, a machine) never are: they would change the catalogue at every
  measurement.

Results come from one disk cache (:mod:`.cache`). A page that shows a computed result
is re-read whenever the cache's stamp changes (new sources, data or versions), so an
incremental build never shows a stale number.
"""

from __future__ import annotations

import importlib
import pathlib
import re
from collections.abc import Callable
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.environment import BuildEnvironment
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective, SphinxRole

from .cache import Cache

_CACHES: dict[str, Cache] = {}


def cache_for(config: Config) -> Cache:
    """The cache of this build's configuration (one per process)."""
    folder = str(config.aiinfra_cache_dir)
    if folder not in _CACHES:
        _CACHES[folder] = Cache(
            pathlib.Path(folder),
            pathlib.Path(config.aiinfra_package_dir),
            pathlib.Path(config.aiinfra_data_dir),
        )
    return _CACHES[folder]


#: The package whose modules are the pages' own: page ``<chapter>/<page>`` shows
#: names of ``aiinfra.book.<chapter>.<page>``.
BOOK_PACKAGE = "aiinfra.book"

# An explicit module: a dotted name of the package, then ":" (not ":=") at the start.
# An expression never starts that way (a slice or a dict has its ":" inside brackets).
_MODULE = re.compile(r"\s*(aiinfra(?:\.[A-Za-z_]\w*)+)\s*:(?!=)")


def page_module(docname: str) -> str:
    """The module of page ``docname``: ``models/flash_attention`` ->
    ``aiinfra.book.models.flash_attention``."""
    return ".".join([BOOK_PACKAGE, *docname.split("/")])


def split_target(target: str, module: str | None = None) -> tuple[str, str]:
    """``(module, expression)`` of a target.

    A target is an expression, evaluated in ``module`` (the page's own), or
    ``aiinfra.x.y:expression``, evaluated in that module of the package.

    Args:
        target: ``"busbw_factor_table()"`` or ``"aiinfra.comm.cost:LINKS['ib400']"``.
        module: the module of a target without one.

    Raises:
        ValueError: no expression, or no module.
    """
    m = _MODULE.match(target)
    if m:
        module, expression = m[1], target[m.end() :]
    else:
        expression = target
    if not module or not expression.strip():
        raise ValueError(
            "expected 'expression' (of the page's module) or 'aiinfra.x.y:expression',"
            f" got {target!r}"
        )
    return module, expression.strip()


def resolve(target: str, module: str | None = None) -> str:
    """The target as ``module:expression``, its module made explicit (a cache key)."""
    return ":".join(split_target(target, module))


def evaluate(
    target: str, cache: Cache | None = None, module: str | None = None, **names: Any
) -> Any:
    """Evaluate a target (:func:`split_target`) in its module's namespace plus
    ``names``.

    Args:
        target: ``"aiinfra.comm.cost:busbw_factor('all_reduce', 8)"``, or an
            expression of ``module``.
        cache: where to look the result up and store it; ``None`` computes.
        module: the module of a target without one (the page's own).
        names: extra names visible to the expression.

    Raises:
        ValueError: ``target`` has no expression, or no module and ``module`` is None.
    """
    module_name, expression = split_target(target, module)

    def compute() -> Any:
        namespace = dict(vars(importlib.import_module(module_name)), **names)
        return eval(expression, namespace)  # noqa: S307 - the book's sources

    key = f"{module_name}:{expression}"
    if cache is None:
        return compute()
    return cache.get(key, compute, module=module_name)


def module_of(target: str) -> str:
    """The module a resolved ``module:expression`` target is evaluated in."""
    return split_target(target)[0]


def note_computed(env: BuildEnvironment, config: Config, target: str) -> None:
    """Note that the current page shows a result of ``target`` (resolved: its
    module explicit): the page is read again when that module's key (its code,
    what it imports, its data) changes."""
    docname = env.current_document.docname
    env.aiinfra_computed.add(docname)
    module = module_of(target)
    keys = env.aiinfra_module_keys.setdefault(docname, {})
    keys[module] = cache_for(config).module_key(module)


def resolve_in(directive: SphinxDirective | SphinxRole, target: str) -> str:
    """A target of the directive's page, its module made explicit."""
    return resolve(target, page_module(directive.env.current_document.docname))


def evaluate_in(directive: SphinxDirective | SphinxRole, target: str) -> Any:
    """Evaluate for a page: in the page's module, cached, the page noted as
    computed."""
    env = directive.env
    target = resolve_in(directive, target)
    note_computed(env, directive.config, target)
    docs = pathlib.Path(env.srcdir)
    return evaluate(target, cache_for(directive.config), DOCS=docs)


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


_MATH = re.compile(r"\$[^$]*\$")
# A field of a table's note or stamp (aiinfra.report.template_fields).
_FIELD = re.compile(r"(?<![\\\w{}])\{([A-Za-z_]\w*)\}(?!\})")


#: Words of fewer than three letters that a table's cell may hold alone ("yes"/"no").
_SHORT_WORDS = frozenset({"no"})


def is_words(text: str) -> bool:
    """Whether a label or figure text is words a translator translates.

    Words: at least one run of three letters and no code name (``ring_all_reduce``),
    or a short word of :data:`_SHORT_WORDS` alone (``no``).
    A text with a digit (outside ``$...$``) is words only if it also has an English
    word in lower case (``attainable TFLOP/s (BF16)``, ``H100, 8192 tokens``): the
    digits then belong to a name or a number inside a sentence. Numbers, sizes
    (``64 MiB``), names with digits (``fp16``, ``Llama 3 8B``, ``r0``) and code are
    not words, and stay as they are in every language.
    """
    text = _FIELD.sub("", _MATH.sub("", text))
    if text.strip() in _SHORT_WORDS:
        return True
    if re.search(r"\w_\w", text):
        return False
    if re.search(r"\d", text):
        return re.search(r"(?<![\w.])[a-z]{3,}(?![\w.])", text) is not None
    return re.search(r"[A-Za-z]{3,}", text) is not None


class CalcRole(SphinxRole):
    """``:calc:`expression|spec```: a number computed at build time."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        target, _, spec = self.text.rpartition("|")
        if not target:  # no "|": the whole text is the target
            target, spec = self.text, ""
        try:
            text = format_value(evaluate_in(self, target), spec)
        except Exception as exc:  # noqa: BLE001 - reported as a build error
            msg = self.inliner.reporter.error(
                f":calc:`{self.text}` failed: {type(exc).__name__}: {exc}",
                line=self.lineno,
            )
            return [nodes.problematic(self.rawtext, self.rawtext)], [msg]
        return [nodes.inline(self.rawtext, text, classes=["calc"])], []


def _words(text: str, source: str, line: int, **attributes: Any) -> nodes.paragraph:
    """A paragraph that gettext extracts (it has a source) and Locale translates."""
    para = nodes.paragraph(text, text, **attributes)
    para.source, para.line = source, line
    return para


def table_nodes(
    columns: list[str],
    rows: list[list[Any]],
    note: str,
    stamp: str,
    caption: str,
    source: str,
    line: int,
    classes: tuple[str, ...] = (),
    inline: Callable[[str], list[nodes.Node]] | None = None,
    words: tuple[int, ...] = (0,),
    fields: dict[str, Any] | None = None,
) -> list[nodes.Node]:
    """A computed table as docutils nodes, its words translatable (module docstring):
    the table, then its note and its stamp. ``inline`` parses the caption's rst
    (roles, literals): a directive passes its state's inline parser; ``words``: the
    columns whose word cells are messages (:class:`aiinfra.report.Table`)."""
    from aiinfra.report import fill, format_cell

    tnode = nodes.table(classes=["aiinfra-table", *classes])
    if caption:
        children = inline(caption) if inline else [nodes.Text(caption)]
        title = nodes.title(caption, "", *children)
        title.source, title.line = source, line
        tnode += title
    group = nodes.tgroup(cols=len(columns))
    tnode += group
    for _ in columns:
        group += nodes.colspec(colwidth=1)
    thead, tbody = nodes.thead(), nodes.tbody()
    thead += nodes.row("", *(nodes.entry("", _words(c, source, line)) for c in columns))
    for r in rows:
        row = nodes.row()
        for i, v in enumerate(r):
            text = format_cell(v)
            if i in words and isinstance(v, str) and is_words(text):
                row += nodes.entry("", _words(text, source, line))
            else:
                row += nodes.entry("", nodes.paragraph("", text))
        tbody += row
    group += thead
    group += tbody
    out: list[nodes.Node] = [tnode]
    values = {k: format_cell(v) for k, v in (fields or {}).items()}
    if note:
        para = _words(note, source, line, classes=["aiinfra-table-note"])
        para["aiinfra_fields"] = values  # filled after translation (FillFields)
        out.append(para)
    if stamp:
        classes = ["aiinfra-table-note", "aiinfra-table-stamp"]
        if values and is_words(_FIELD.sub("", stamp)):
            # A template with words: one message, "{gpus} GPUs, {rate} per second".
            para = _words(stamp, source, line, classes=classes)
            para["aiinfra_fields"] = values
        else:  # a machine and a date, "p = 8": shown as it is, never a message
            para = nodes.paragraph("", fill(stamp, fields or {}), classes=classes)
            para["translatable"] = False
        out.append(para)
    return out


class FillFields(SphinxTransform):
    """Fill the ``{fields}`` of table notes and stamps, after Locale (priority 20)
    has put their translation in; the gettext build keeps the templates (they are
    the messages)."""

    default_priority = 25

    def apply(self, **kwargs: Any) -> None:
        if self.env._builder_cls.name == "gettext":
            return
        for para in self.document.findall(nodes.paragraph):
            values = para.get("aiinfra_fields")
            if not values:
                continue
            for text in list(para.findall(nodes.Text)):
                new = fill_text(str(text), values)
                if new != str(text):
                    text.parent.replace(text, nodes.Text(new))


def fill_text(text: str, values: dict[str, str]) -> str:
    """``text`` with each ``{field}`` of ``values`` replaced (others kept)."""
    return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), text)


class TableDirective(SphinxDirective):
    """``.. aiinfra-table:: expression``: a Table computed at build time."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True

    def run(self) -> list[nodes.Node]:
        target = self.arguments[0]
        try:
            table = evaluate_in(self, target)
            if table is None:  # a result that exists only on some machines (a GPU's)
                return []
            columns, rows = table.columns, table.rows
            note, stamp = table.note, getattr(table, "stamp", "")
            words = getattr(table, "words", (0,))
            fields = getattr(table, "fields", {})
        except Exception as exc:  # noqa: BLE001
            return [
                self.state_machine.reporter.error(
                    f"aiinfra-table {target!r} failed: {type(exc).__name__}: {exc}",
                    line=self.lineno,
                )
            ]
        source, line = self.get_source_info()
        caption = " ".join(x.strip() for x in self.content if x.strip())
        return table_nodes(
            *(columns, rows, note, stamp, caption, source, line),
            inline=inline_rst(self),
            words=words,
            fields=fields,
        )


def inline_rst(directive: SphinxDirective) -> Callable[[str], list[nodes.Node]]:
    """A caption's inline rst as nodes (a role renders, not its source); a broken
    role is reported as it is parsed."""
    return lambda text: directive.state.inline_text(text, directive.lineno)[0]


def _init_env(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    if not hasattr(env, "aiinfra_computed"):
        env.aiinfra_computed = set()
    if not hasattr(env, "aiinfra_module_keys"):
        env.aiinfra_module_keys = {}


def _purge(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    getattr(env, "aiinfra_computed", set()).discard(docname)
    getattr(env, "aiinfra_module_keys", {}).pop(docname, None)


def _stale(
    app: Sphinx, env: BuildEnvironment, added: set, changed: set, removed: set
) -> list[str]:
    """Pages with computed results whose inputs changed since the last build.

    A page is stale when the cache's base changed (versions, drawing code) or when
    the key of a module it evaluated in changed: its code, a module it imports or
    its data. Editing one module re-reads only the pages that depend on it.
    """
    cache = cache_for(app.config)
    computed = getattr(env, "aiinfra_computed", set())
    if getattr(env, "aiinfra_stamp", None) != cache.base:
        env.aiinfra_stamp = cache.base
        return sorted(computed)
    keys = getattr(env, "aiinfra_module_keys", {})
    return sorted(
        doc
        for doc in computed
        if doc not in keys
        or any(cache.module_key(m) != k for m, k in keys[doc].items())
    )


def setup(app: Sphinx) -> None:
    root = pathlib.Path(app.confdir).parent
    app.add_config_value("aiinfra_package_dir", str(root / "reference" / "aiinfra"), "")
    app.add_config_value(
        "aiinfra_data_dir", str(pathlib.Path(app.confdir) / "_data"), ""
    )
    app.add_config_value("aiinfra_cache_dir", str(root / "build" / ".book-cache"), "")
    app.add_role("calc", CalcRole())
    app.add_transform(FillFields)
    app.add_directive("aiinfra-table", TableDirective)
    app.connect("env-before-read-docs", _init_env)
    app.connect("env-purge-doc", _purge)
    app.connect("env-get-outdated", _stale)
