"""Headless Chromium for the book's browser checks: where it is, its flags, and
why a check is skipped (or, under CI, fails) when it is missing."""

from __future__ import annotations

import os
import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

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
