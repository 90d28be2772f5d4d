"""Every build and check of the book: ``nox -l`` lists them.

- ``nox -s book``: build the whole site (book and decks, English and Chinese),
  incrementally, and serve it on http://127.0.0.1:8000 (``-- --no-serve`` only
  builds; ``-- --lang zh_CN --builder html`` builds one edition).
  The whole site includes the editions: each page's notebook (written by the HTML
  build), each deck as PDF, the book as PDF and EPUB (``tools/editions.py``, only
  what changed); a build narrowed with ``--lang``/``--builder`` or
  ``--no-editions`` skips the PDFs and EPUBs.
- ``nox -s notebooks``: each page of a chapter as a Jupyter notebook, and the zips.
- ``nox -s editions``: the deck PDFs and the book's PDF and EPUB of a built site.
- ``nox -s preview``: live-reloading preview of one edition while writing.
- ``nox -s tests``: every test CI runs (package, book builds, browser checks).
- ``nox -s translate``: gettext -> catalogue update -> stat -> what is left.
- ``nox -s lint``: ruff.
- ``nox -s bench``: the CPU benchmarks whose results the book renders.
- ``nox -s gpu``: on a CUDA machine, the ``gpu`` tests and the GPU benchmarks.
- ``nox -s lock``: resolve pyproject.toml afresh and rewrite ``constraints.txt``,
  the exact version of every package that the sessions install.
"""

from __future__ import annotations

import json
import pathlib

import nox

ROOT = pathlib.Path(__file__).resolve().parent
nox.options.default_venv_backend = "venv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["book"]

PYTHON = "3.11"
# torch first and pinned: pip then takes the local CPU wheel instead of resolving a
# multi-GB CUDA build for a dependency that asks for "torch".
TORCH = "torch==2.13.0"
# Every package at the version it was tested with (nox -s lock rewrites it).
CONSTRAINTS = str(ROOT / "constraints.txt")


def install(session: nox.Session, *extras: str) -> None:
    """torch, then the package with ``extras``, every version from constraints.txt."""
    session.install("-c", CONSTRAINTS, TORCH)
    target = f".[{','.join(extras)}]" if extras else "."
    session.install("-c", CONSTRAINTS, "-e", target)


@nox.session(python=PYTHON)
def book(session: nox.Session) -> None:
    """Build book and decks in both languages into build/site, then serve them.

    Incremental: only what changed is rebuilt. Arguments pass through to
    ``tools/book.py build``: ``nox -s book -- --lang zh_CN --builder html`` rebuilds
    one edition, ``--fresh`` everything; ``--no-serve`` only builds.
    """
    install(session, "docs")
    args = [
        a for a in session.posargs if a != "--no-serve" and not a.startswith("--port=")
    ]
    session.run("python", "tools/book.py", "build", *args)
    if "--no-serve" not in session.posargs:
        session.run("python", "tools/book.py", "serve", *port_args(session))


@nox.session(python=PYTHON)
def notebooks(session: nox.Session) -> None:
    """Each page of a chapter as a Jupyter notebook, both languages, and the zips.

    The HTML build writes them (incremental): ``build/site/<lang>/<chapter>/
    <page>.ipynb`` and ``build/site/<lang>/downloads/aiinfra-notebooks-*.zip``.
    """
    install(session, "docs")
    session.run("python", "tools/book.py", "notebooks", *session.posargs)


@nox.session(python=PYTHON)
def editions(session: nox.Session) -> None:
    """The book to take along from a built site: every deck as PDF, the book as
    PDF and EPUB (``-- --lang zh_CN --only epub`` narrows it). Needs Chromium for
    the PDFs (without it they are skipped, with the reason)."""
    install(session, "docs")
    session.run("python", "tools/book.py", "editions", *session.posargs)


@nox.session(python=PYTHON)
def preview(session: nox.Session) -> None:
    """Live preview of one edition: rebuilds on each save, reloads the browser.

    ``nox -s preview -- --lang zh_CN --port 8001`` (sphinx-autobuild on 127.0.0.1).
    """
    install(session, "docs")
    session.run("python", "tools/book.py", "preview", *session.posargs)


@nox.session(python=PYTHON)
def serve(session: nox.Session) -> None:
    """Serve an already built site on 127.0.0.1."""
    # tools/book.py serve needs only the standard library.
    session.run("python", "tools/book.py", "serve", *port_args(session))


def port_args(session: nox.Session) -> list[str]:
    for arg in session.posargs:
        if arg.startswith("--port="):
            return ["--port", arg.split("=", 1)[1]]
    return []


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every test CI runs: the package, the book's builds and catalogues, browsers.

    ``nox -s tests -- -m "not slow"`` is the fast lane: no spawned ranks.
    """
    install(session, "test")
    env = {"TORCH_EXTENSIONS_DIR": str(ROOT / ".torch_extensions")}
    # tests/book builds every edition with -W once (a session fixture), then checks
    # the catalogues and drives the built site in Chromium.
    # The slowest tests are listed at the end: the 12-minute budget is watched.
    session.run("python", "-m", "pytest", "--durations=30", *session.posargs, env=env)


@nox.session(python=PYTHON)
def translate(session: nox.Session) -> None:
    """Refresh every translation's catalogues (docs/languages.toml) from the sources;
    print ``sphinx-intl stat`` and, entry by entry, what is left to translate."""
    install(session, "docs")
    session.run("python", "tools/book.py", "translate")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("-c", CONSTRAINTS, "ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


def _results_commands(session: nox.Session, runs: str) -> list[list[str]]:
    """The commands of :func:`aiinfra.results.commands` (``runs``: a Python
    expression in that module), asked from the session's own environment."""
    code = (
        "import json; from aiinfra import results; "
        f"print(json.dumps(results.commands({runs})))"
    )
    out = session.run("python", "-c", code, silent=True)
    return json.loads(out.strip().splitlines()[-1])


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run every CPU benchmark and write its stamped results under docs/_data/bench/.

    One command per kind of :data:`aiinfra.results.KINDS`; extra arguments are
    passed to each.
    """
    install(session, "docs", "parallel")
    env = {"TORCH_EXTENSIONS_DIR": str(ROOT / ".torch_extensions")}
    for command in _results_commands(session, ""):
        session.run(*command, *session.posargs, env=env)


@nox.session(python=PYTHON)
def gpu(session: nox.Session) -> None:
    """On a CUDA machine: every ``gpu``-marked test, then the GPU benchmarks.

    The tests run the Triton kernels compiled and the distributed code over NCCL;
    the benchmarks (Triton attention forward and backward against SDPA, bf16, causal,
    d = 128, N 1K-16K; DDP over NCCL on one rank; the GPU's own roofline, bf16)
    write ``attention-cuda.json``, ``ddp-nccl.json`` and ``roofline-cuda.json``; no
    page renders them yet.
    """
    install(session, "test")
    env = {"TORCH_EXTENSIONS_DIR": str(ROOT / ".torch_extensions")}
    session.run("python", "-m", "pytest", "-m", "gpu", "-q", *session.posargs, env=env)
    for command in _results_commands(session, "results.GPU_RUNS"):
        session.run(*command, env=env)


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Resolve pyproject.toml afresh (no constraints) and rewrite constraints.txt.

    The pins of pyproject.toml are kept; what they pull in is resolved again. Run it
    after changing a pin, then run the tests.
    """
    session.install(TORCH)
    session.install("-e", ".[test,lint]")
    out = session.run(
        "python", "-m", "pip", "freeze", "--exclude-editable", silent=True
    )
    pins = {}
    for line in out.splitlines():
        name, sep, version = line.partition("==")
        if sep:
            # The CPU wheel's local version (+cpu) would refuse the CUDA wheel.
            pins[name.lower().replace("_", "-")] = version.split("+")[0]
    header = [
        line
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.startswith("#")
    ]
    body = [f"{name}=={version}" for name, version in sorted(pins.items())]
    (ROOT / "constraints.txt").write_text("\n".join(header + body) + "\n")
    session.log(f"constraints.txt: {len(body)} packages")
