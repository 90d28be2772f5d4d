"""Compute the book's values on every core before a fresh build reads its pages.

The builds (two languages, book and decks) run side by side and read the pages in
the same order, so they ask for the same computed value at the same moment: one
computes it while the others wait on its lock (:mod:`.cache`), and a fresh build
computes on one core at a time. :func:`warm` first computes every value the pages
name (``:calc:``, ``aiinfra-table``, ``aiinfra-figure``) in a pool of processes, so
that the builds find them all cached. It does nothing when the cache already holds
them, as after an incremental edit. A value that fails is left to the build, which
reports it on its page.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import pathlib
import re

from .cache import Cache

TARGET = re.compile(
    r":calc:`(?P<calc>[^`]+)`|^\.\. aiinfra-(?:figure|table):: (?P<directive>.+)$",
    re.M,
)


def targets(docs: pathlib.Path) -> list[str]:
    """Every computed value the pages of ``docs`` name, each once, in page order."""
    found: dict[str, None] = {}
    for rst in sorted(docs.rglob("*.rst")):
        if "_build" in rst.parts or "api" in rst.relative_to(docs).parts[:1]:
            continue
        for m in TARGET.finditer(rst.read_text(encoding="utf-8")):
            if m["calc"]:
                target, bar, _spec = m["calc"].rpartition("|")
                target = target if bar else m["calc"]
            else:
                target = m["directive"]
            found.setdefault(target.strip(), None)
    return list(found)


def _cache(docs: pathlib.Path) -> Cache:
    root = docs.parent
    package = root / "reference" / "aiinfra"
    return Cache(root / "build" / ".book-cache", package, docs / "_data")


def _compute(docs: str, target: str) -> bool:
    """In a worker: compute one value into the cache; whether it succeeded."""
    from .compute import evaluate

    try:
        evaluate(target, _cache(pathlib.Path(docs)), DOCS=pathlib.Path(docs))
    except Exception:  # noqa: BLE001 - the build reports it, on its page
        return False
    finally:
        try:
            import matplotlib.pyplot as plt

            plt.close("all")
        except ImportError:  # pragma: no cover
            pass
    return True


def missing(docs: pathlib.Path) -> list[str]:
    """The targets that the cache does not hold yet."""
    cache = _cache(docs)
    return [t for t in targets(docs) if not cache.holds(t)]


def warm(docs: pathlib.Path, jobs: int, at_least: int = 8) -> int:
    """Compute the missing values in ``jobs`` processes; return how many.

    Nothing runs when fewer than ``at_least`` are missing: starting the workers
    (each imports torch) would cost more than an incremental build saves.
    """
    todo = missing(docs)
    if jobs < 2 or len(todo) < at_least:
        return 0
    # Fresh interpreters with the builds' environment (hash seed, backend), so that
    # a value is computed exactly as a build would compute it.
    saved = dict(os.environ)
    os.environ.update(PYTHONHASHSEED="0", MPLBACKEND="Agg")
    try:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
            done = list(pool.map(_compute, [str(docs)] * len(todo), todo))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return sum(done)
