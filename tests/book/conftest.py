"""Fixtures for the book's own checks: one fresh build of the whole site per test
run (the four outputs side by side), and a static server for it on 127.0.0.1."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import pathlib
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SITE = ROOT / "build" / "site"
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


@pytest.fixture(scope="session")
def site(book_tool) -> pathlib.Path:
    """Build every edition (book and decks, en and zh_CN) with -W, once per run,
    fresh (-E) as CI builds it.

    ``AIINFRA_REUSE_SITE=1`` checks the site already built in ``build/site`` instead
    (a quicker loop while writing; CI never sets it).
    """
    if os.environ.get("AIINFRA_REUSE_SITE") == "1" and (SITE / "index.html").exists():
        return SITE
    book_tool.build(SITE, fresh=True)  # raises SystemExit on any warning
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
