"""Headless Chromium for the book's browser checks: where it is, its flags, and
why a check is skipped (or, under CI, fails) when it is missing."""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil

_spec = importlib.util.spec_from_file_location(
    "_chromium_editions", pathlib.Path(__file__).parents[2] / "tools" / "editions.py"
)
_editions = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_editions)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = _editions.FLAGS  # the flags the build prints its PDFs with

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

_missing = (
    "playwright is not installed"
    if sync_playwright is None
    else "no chromium on PATH (apt-get install chromium)"
    if not CHROMIUM
    else ""
)
if _missing and os.environ.get("CI") == "true":
    raise RuntimeError(f"browser checks must run under CI, but {_missing}")
