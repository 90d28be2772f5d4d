"""``.. aiinfra-calculator:: KIND``: the package's own calculators in the page.

A reader types a model and a cluster and gets what the ``aiinfra`` command prints
for them, computed in the browser by the very package the book tests: Pyodide (a
CPython compiled to WebAssembly, the npm package pinned in
``docs/_calculator/package-lock.json``) runs in a Web Worker, so the page never
freezes, and loads the package as a pure-Python wheel that this build makes from
``reference/aiinfra``. Nothing is fetched from another host: Pyodide is copied
into the site (``_static/pyodide/``), the wheel beside it (``_static/calculator/``).

- The form is :func:`aiinfra.calculator.forms.page_spec`: the command's own flags.
- The answer is :func:`aiinfra.calculator.forms.run`: ``aiinfra <command> --json``
  for the typed flags; a bad value shows the command's own message next to its
  field.
- Every word the form and its answers can show is a label (``labels.po``): the
  fields' names, the buttons and messages (:data:`UI`), and the words of the
  results (:data:`aiinfra.calculator.forms.WORDS`), so the Chinese edition shows
  them in Chinese.
- Only the HTML site has calculators: the decks, the single page, the EPUB and the
  notebooks keep the page's static tables (the node is removed there).
"""

from __future__ import annotations

import fcntl
import hashlib
import html
import json
import os
import pathlib
import re
import shutil
import subprocess
import zipfile
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

from . import languages
from .languages import label

ROOT = pathlib.Path(__file__).resolve().parents[3]
NPM_PROJECT = ROOT / "docs" / "_calculator"
PYODIDE_CACHE = ROOT / "build" / "_pyodide"
#: The files of the Pyodide npm package that a page loads (no CDN: all local).
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)

#: The calculator's own words: ``key -> (English, note for the translator)``.
UI = {
    "calc_title": ("Calculator: your model, your cluster", "Heading of a calculator."),
    "calc_intro": (
        "The numbers come from {function}, the same function as the tables above, "
        "run in your browser by Pyodide; the command below prints the same.",
        "A calculator's first sentence; {function} is the function's name, linked.",
    ),
    "calc_run": ("Compute", "A calculator's button."),
    "calc_loading": (
        "Starting Python in your browser (Pyodide, about 14 MB, once per visit)…",
        "Shown while the calculator loads.",
    ),
    "calc_running": ("Computing…", "Shown while a calculator computes."),
    "calc_done": ("Computed in {seconds} s.", "After a result; {seconds} is a number."),
    "calc_failed": (
        "The calculator could not start: {error}. It runs only when the site is "
        "served over HTTP (nox -s book serves it), not from a file.",
        "Shown when Pyodide cannot load; {error} is the browser's message.",
    ),
    "calc_error": ("Not computed:", "Before the command's error message."),
    "calc_config": (
        "Paste a Hugging Face config.json",
        "Placeholder of the text box for a pasted model config.",
    ),
    "calc_pasted": ("config.json (pasted below)", "The model list's last choice."),
    "calc_command": ("Same in a terminal:", "Before the equivalent aiinfra command."),
    "calc_figure": ("{column} by {row}", "Title of a calculator's figure."),
}


#: A result's word with no run of three lowercase letters is a unit, an
#: abbreviation or a symbol (GiB, tp, TFLOP/s, MFU (%)): the page shows it as it is.
_AS_IS = re.compile(r"^(?!.*[a-z]{3}).*$")


def _labels() -> dict[str, tuple[str, str]]:
    found = dict(UI)
    try:
        from aiinfra.calculator import forms
    except ImportError:  # a package without calculators (the extension on its own)
        return found
    for flag, text in forms.FIELD_NAMES.items():
        found[f"calc_field:{flag}"] = (text, f"A calculator's field, flag {flag}.")
    for word in forms.WORDS:
        if _AS_IS.match(word):
            continue
        found[f"calc_word:{word}"] = (
            word,
            "A word in a calculator's result (a column, a row, a note), as the "
            "aiinfra command prints it.",
        )
    return found


languages.LABELS.update(_labels())


class aiinfra_calculator(nodes.General, nodes.Element):  # noqa: N801 - a docutils node
    """A calculator: its kind and starting values; the HTML writer draws it."""


class CalculatorDirective(SphinxDirective):
    """``.. aiinfra-calculator:: memory`` (or ``plan``, ``budget``).

    ``:values:`` sets starting values, as flags: ``--model llama-3-405b --gpus 16384``.
    """

    required_arguments = 1
    option_spec = {"values": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        from aiinfra.calculator import forms

        kind = self.arguments[0]
        if kind not in forms.FORMS:
            raise self.error(
                f"aiinfra-calculator: kind must be one of {', '.join(forms.FORMS)}"
            )
        words = self.options.get("values", "").split()
        if len(words) % 2:
            raise self.error("aiinfra-calculator: :values: must be flag-value pairs")
        values = dict(zip(words[::2], words[1::2], strict=True))
        unknown = set(values) - set(forms.FORMS[kind].flags)
        if unknown:
            raise self.error(
                f"aiinfra-calculator: {', '.join(sorted(unknown))} is not a field"
            )
        lang = self.env.config.language or "en"
        node = aiinfra_calculator(kind=kind, values=values)
        # The sentence naming the function: a cross-reference to its API entry. Built
        # in the edition's language, with no source: gettext does not collect it.
        intro = nodes.paragraph(classes=["calc-intro"])
        before, _, after = label("calc_intro", lang).partition("{function}")
        api = forms.FORMS[kind].api
        ref = addnodes.pending_xref(
            "", refdomain="py", reftype="func", reftarget=api, refexplicit=True
        )
        ref += nodes.literal(api, api.rsplit(".", 1)[1] + "()")
        intro += [nodes.Text(before), ref, nodes.Text(after)]
        node += intro
        # The form and its words come from these: a change redraws the page.
        self.env.note_dependency(str(NPM_PROJECT / "package-lock.json"))
        self.env.note_dependency(forms.__file__)
        return [node]


def _remove_elsewhere(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved: only the HTML site has calculators (decks, PDF, EPUB don't)."""
    if app.builder.name != "html":
        for node in list(doctree.findall(aiinfra_calculator)):
            node.parent.remove(node)


def _static(docname: str) -> str:
    return "../" * docname.count("/") + "_static/"


def visit_calculator(self, node: aiinfra_calculator) -> None:  # noqa: ANN001
    from aiinfra.calculator import forms

    lang = self.builder.config.language or "en"
    spec = forms.page_spec(node["kind"])
    for field in spec["fields"]:
        if field["flag"] in node["values"]:
            field["default"] = node["values"][field["flag"]]
    words = {key: label(key, lang) for key in _labels()}
    base = _static(self.builder.current_docname)
    self.body.append(
        '<section class="aiinfra-calculator" '
        f'data-spec="{html.escape(json.dumps(spec))}" '
        f'data-words="{html.escape(json.dumps(words, ensure_ascii=False))}" '
        f'data-base="{base}" data-wheel="calculator/{wheel_name()}">'
        f'<p class="calc-title">{html.escape(label("calc_title", lang))}</p>'
    )


def depart_calculator(self, node: aiinfra_calculator) -> None:  # noqa: ANN001
    base = _static(self.builder.current_docname)
    self.body.append(
        '<div class="calc-body"></div></section>'
        f'<script type="module" src="{base}calculator.js"></script>'
    )


def skip(self, node: nodes.Node) -> None:  # noqa: ANN001
    raise nodes.SkipNode


# ----------------------------------------------------------------- the assets


def wheel_name() -> str:
    import aiinfra

    return f"aiinfra-{aiinfra.__version__}-py3-none-any.whl"


def build_wheel(target: pathlib.Path) -> pathlib.Path:
    """A pure-Python wheel of the package (without :mod:`aiinfra.book`), made with
    the standard library: every file's bytes and a fixed date, so the same sources
    give the same wheel."""
    import aiinfra

    package = pathlib.Path(aiinfra.__file__).parent
    version = aiinfra.__version__
    info = f"aiinfra-{version}.dist-info"
    files: dict[str, bytes] = {}
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package.parent)
        if (
            path.is_file()
            and "__pycache__" not in rel.parts
            and rel.parts[1:2] != ("book",)
            and path.suffix not in {".pyc", ".so"}
        ):
            files[rel.as_posix()] = path.read_bytes()
    files[f"{info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: aiinfra\nVersion: {version}\n"
    ).encode()
    files[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: aiinfra-book\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n"
    )
    record = [
        f"{name},sha256={_b64(hashlib.sha256(data).digest())},{len(data)}"
        for name, data in files.items()
    ]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    target.mkdir(parents=True, exist_ok=True)
    out = target / wheel_name()
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info_ = zipfile.ZipInfo(name, date_time=(2025, 12, 1, 0, 0, 0))
            info_.compress_type = zipfile.ZIP_DEFLATED
            info_.external_attr = 0o644 << 16
            z.writestr(info_, data)
    os.replace(tmp, out)
    return out


def _b64(digest: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def pinned_version() -> str:
    return json.loads((NPM_PROJECT / "package.json").read_text())["dependencies"][
        "pyodide"
    ]


def pyodide_dir() -> pathlib.Path:
    """The pinned Pyodide npm package, installed once into ``build/_pyodide`` with
    ``npm ci`` (the lock file's integrity hashes checked); a lock serialises the
    editions' parallel builds."""
    folder = PYODIDE_CACHE / "node_modules" / "pyodide"
    PYODIDE_CACHE.mkdir(parents=True, exist_ok=True)
    with open(PYODIDE_CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        installed = folder / "package.json"
        if (
            installed.is_file()
            and json.loads(installed.read_text())["version"] == pinned_version()
            and all((folder / f).is_file() for f in PYODIDE_FILES)
        ):
            return folder
        npm = shutil.which("npm")
        if npm is None:
            raise ExtensionError(
                "the book's calculators vendor Pyodide from the npm registry: install "
                "Node.js's npm (Debian: apt-get install npm) and build again"
            )
        for name in ("package.json", "package-lock.json"):
            shutil.copy(NPM_PROJECT / name, PYODIDE_CACHE / name)
        command = [
            npm,
            "ci",
            "--omit=dev",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
        ]
        done = subprocess.run(
            command, cwd=PYODIDE_CACHE, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ExtensionError(f"npm ci of Pyodide failed:\n{done.stderr[-2000:]}")
        return folder


def _copy_if_changed(src: pathlib.Path, dst: pathlib.Path) -> None:
    if dst.is_file() and dst.stat().st_size == src.stat().st_size:
        if dst.read_bytes() == src.read_bytes():
            return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + f".{os.getpid()}.tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def copy_assets(app: Sphinx, exception: Exception | None) -> None:
    """build-finished of the HTML site: Pyodide and the wheel into ``_static``."""
    if exception is not None or app.builder.name != "html":
        return
    if not getattr(app.env, "aiinfra_calculators", None):
        return
    static = pathlib.Path(app.outdir) / "_static"
    source = pyodide_dir()
    for name in PYODIDE_FILES:
        _copy_if_changed(source / name, static / "pyodide" / name)
    build_wheel(static / "calculator")


def _note_pages(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: which pages have a calculator (the assets are copied if any)."""
    found = getattr(app.env, "aiinfra_calculators", set())
    docname = app.env.docname
    if any(True for _ in doctree.findall(aiinfra_calculator)):
        found.add(docname)
    else:
        found.discard(docname)
    app.env.aiinfra_calculators = found


def _purge(app: Sphinx, env: Any, docname: str) -> None:
    getattr(env, "aiinfra_calculators", set()).discard(docname)


def setup(app: Sphinx) -> None:
    app.add_node(
        aiinfra_calculator,
        html=(visit_calculator, depart_calculator),
        latex=(skip, None),
        text=(skip, None),
        man=(skip, None),
        texinfo=(skip, None),
    )
    app.add_directive("aiinfra-calculator", CalculatorDirective)
    app.connect("doctree-read", _note_pages)
    app.connect("env-purge-doc", _purge)
    app.connect("doctree-resolved", _remove_elsewhere, priority=100)
    app.connect("build-finished", copy_assets)
