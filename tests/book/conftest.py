"""Fixtures for the book's own checks: one fresh build of the whole site per test
run (the four outputs side by side), and a static server for it on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import pathlib
import signal
import subprocess
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SITE = ROOT / "build" / "site"
EXECUTED = ROOT / "build" / "executed"  # the site's notebooks, executed
sys.path.insert(0, str(DOCS / "_ext"))

from aiinfra_book import languages  # noqa: E402
from aiinfra_book.chapters import chapters  # noqa: E402

CHAPTERS = chapters(DOCS)


def label(key: str, lang: str) -> str:
    """A word the build writes, as the edition's ``labels.po`` translates it
    (English while untranslated), its ``{fields}`` not filled in."""
    po = DOCS / "locale" / lang / "LC_MESSAGES" / "labels.po"
    return languages.read_labels(po).get(key, languages.LABELS[key][0])


def _load_book_tool():
    spec = importlib.util.spec_from_file_location(
        "book_tool", ROOT / "tools" / "book.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def book_tool():
    return _load_book_tool()


def reuse_site() -> bool:
    """``AIINFRA_REUSE_SITE=1`` and a built site: check it instead of building."""
    return (
        os.environ.get("AIINFRA_REUSE_SITE") == "1" and (SITE / "index.html").exists()
    )


_BACKGROUND: dict[str, object] = {}


def start_site_build() -> None:
    """Start the fresh build of the site in another process, once per run.

    ``tests/conftest.py`` calls it when the run holds tests of the built site and
    orders those tests last: the build (CPU-bound, two processes) then runs beside
    the rest of the suite, much of which waits on one core, on spawned ranks or on
    a subprocess, instead of before it.
    """
    if "proc" in _BACKGROUND or reuse_site():
        return
    log = open(ROOT / ".tmp" / "site-build.log", "w+", encoding="utf-8")  # noqa: SIM115
    cmd = [sys.executable, str(ROOT / "tools" / "book.py"), "build", "--fresh"]
    # Two builds and the tests share two cores: torch's intra-op threads would
    # spin against each other, so each build computes on one.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    _BACKGROUND.update(proc=proc, log=log)


def start_notebooks() -> None:
    """Once the background build has succeeded, execute the site's notebooks in
    the background too (``tests/book/run_notebooks.py``), beside the rest of the
    suite; ``tests/conftest.py`` asks after every test, the ``site`` fixture
    once more."""
    proc = _BACKGROUND.get("proc")
    if proc is None or "notebooks" in _BACKGROUND or proc.poll() != 0:
        return
    log = open(ROOT / ".tmp" / "notebooks.log", "w+", encoding="utf-8")  # noqa: SIM115
    cmd = [sys.executable, "-m", "tests.book.run_notebooks", str(SITE), str(EXECUTED)]
    cmd += [c for c in languages.published(languages.load(DOCS))]
    run = subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    _BACKGROUND.update(notebooks=run, notebooks_log=log)


def background_notebooks() -> tuple[subprocess.Popen, object] | None:
    """The background execution of the notebooks and its log, if one runs."""
    if "notebooks" not in _BACKGROUND:
        return None
    return _BACKGROUND["notebooks"], _BACKGROUND["notebooks_log"]


def stop_site_build() -> None:
    """End a background build still running (a run stopped before its site tests),
    with the sphinx-build processes it started, and the notebooks' execution."""
    for key in ("proc", "notebooks"):
        proc = _BACKGROUND.get(key)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


@pytest.fixture(scope="session")
def site(book_tool) -> pathlib.Path:
    """Build every edition (book and decks, en and zh_CN) with -W, once per run,
    fresh (-E) as CI builds it (in the background if :func:`start_site_build` ran).

    ``AIINFRA_REUSE_SITE=1`` checks the site already built in ``build/site`` instead
    (a quicker loop while writing; CI never sets it).
    """
    if reuse_site():
        return SITE
    if "proc" not in _BACKGROUND:
        book_tool.build(SITE, fresh=True)  # raises SystemExit on any warning
        return SITE
    proc, log = _BACKGROUND["proc"], _BACKGROUND["log"]
    returncode = proc.wait(timeout=1800)
    log.seek(0)
    output = log.read()
    if returncode:
        pytest.fail(f"the site build failed (exit {returncode}):\n{output}")
    start_notebooks()
    return SITE


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # noqa: D102 - keep test output clean
        pass


@pytest.fixture(scope="session")
def server(site) -> str:
    """Serve the built site on an ephemeral port of 127.0.0.1; yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for every browser check (test_browser, test_decks)."""
    from .chromium import CHROMIUM, FLAGS, _missing, sync_playwright

    if _missing:
        pytest.skip(_missing)
    # Playwright gives each launch a new, empty profile (its own --user-data-dir).
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()
