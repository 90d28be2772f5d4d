"""Every build and check of the book: ``nox -l`` lists them.

- ``nox -s book``: build the whole site (book and decks, English and Chinese) and
  serve it on http://127.0.0.1:8000 (``nox -s book -- --no-serve`` only builds).
- ``nox -s tests``: every test CI runs (package, book builds, browser checks).
- ``nox -s translate``: gettext -> sphinx-intl update -> per-chapter statistics.
- ``nox -s lint``: ruff.
- ``nox -s bench``: the benchmarks whose results the book renders.
"""

from __future__ import annotations

import os
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
DEEPSPEED = "deepspeed==0.19.8"
TRITON = "triton==3.7.1"


def install(session: nox.Session, *extras: str) -> None:
    session.install(TORCH)
    session.install("-e", f".[{','.join(extras)}]" if extras else ".")


@nox.session(python=PYTHON)
def book(session: nox.Session) -> None:
    """Build book and decks in both languages into build/site, then serve them."""
    install(session, "docs")
    session.run("python", "tools/book.py", "build")
    if "--no-serve" not in session.posargs:
        session.run("python", "tools/book.py", "serve", *port_args(session))


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
    """Every test CI runs: the package, the book's builds and catalogues, browsers."""
    install(session, "docs", "test")
    session.install(DEEPSPEED, TRITON)
    env = {"TORCH_EXTENSIONS_DIR": str(ROOT / ".torch_extensions")}
    # tests/book builds every edition with -W once (a session fixture), then checks
    # the catalogues and drives the built site in Chromium.
    session.run("python", "-m", "pytest", *session.posargs, env=env)


@nox.session(python=PYTHON)
def translate(session: nox.Session) -> None:
    """Refresh the Chinese catalogues from the sources and print their statistics."""
    install(session, "docs")
    session.run("python", "tools/book.py", "translate")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Run the benchmarks and write their stamped results under docs/_data/bench/."""
    install(session, "docs")
    session.install(DEEPSPEED)
    backend = "nccl" if os.environ.get("AIINFRA_BACKEND") == "nccl" else "gloo"
    out = ROOT / "docs" / "_data" / "bench"
    session.run(
        "aiinfra",
        "bench",
        "collectives",
        "--world-size",
        "4",
        "--backend",
        backend,
        "--out",
        str(out / f"collectives-{backend}.json"),
        *session.posargs,
    )
    env = {"TORCH_EXTENSIONS_DIR": str(ROOT / ".torch_extensions")}
    session.run(
        "aiinfra",
        "bench",
        "ddp",
        "--world-size",
        "2",
        "--out",
        str(out / "ddp-gloo.json"),
        env=env,
    )
    session.run(
        "aiinfra", "bench", "zero", "--out", str(out / "zero-gloo.json"), env=env
    )
