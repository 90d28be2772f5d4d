"""Progress of a long measurement on stderr, shown only when a command asks.

A benchmark wraps its loops over configurations and repeats in :func:`track`, and
a step that runs elsewhere (spawned ranks, a ``torchrun`` job) in :func:`waiting`.
Both do nothing but iterate, or wait, unless the ``aiinfra`` command turned
progress on with :func:`shown` (on a terminal, without ``--quiet``): a library
call, a test or the book's build never prints a bar. The bars are ``tqdm``'s, on
stderr, so stdout keeps only the tables. The command's one line saying what will
run and about how long is printed when the work starts (the first :func:`track` or
:func:`waiting`), after its flags were checked.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

# Whether bars are drawn: set only by shown(), for the length of a command.
_SHOWN = contextvars.ContextVar("aiinfra_progress_shown", default=False)
# The line to print when the work starts (once), or None.
_ANNOUNCE: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "aiinfra_progress_announce", default=None
)


@contextlib.contextmanager
def shown(enabled: bool = True, announce: str = "") -> Iterator[None]:
    """Draw the bars of :func:`track` and :func:`waiting` inside this block.

    Args:
        enabled: draw them (else only ``announce`` is printed).
        announce: printed to stderr once, when the first of them starts.
    """
    token = _SHOWN.set(enabled)
    said = _ANNOUNCE.set([announce] if announce else None)
    try:
        yield
    finally:
        _SHOWN.reset(token)
        _ANNOUNCE.reset(said)


def _announce() -> None:
    pending = _ANNOUNCE.get()
    if pending:
        print(pending.pop(), file=sys.stderr, flush=True)


def is_shown() -> bool:
    """Whether progress is drawn here (inside :func:`shown`)."""
    return _SHOWN.get()


def track(items: Iterable[T], desc: str, total: int | None = None) -> Iterator[T]:
    """``items``, one at a time, with a bar ``desc: 3/8`` when progress is shown.

    Args:
        items: the configurations (or repeats) of a measurement.
        desc: what one item is, e.g. ``"batch sizes"``.
        total: the number of items when ``items`` has no ``len``.
    """
    _announce()
    if not _SHOWN.get():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=desc, total=total, file=sys.stderr, leave=False)


@contextlib.contextmanager
def waiting(desc: str, expected_s: float) -> Iterator[None]:
    """A bar that fills with elapsed time while a block runs elsewhere.

    For work this process cannot count (spawned ranks, a ``torchrun`` job): the
    bar shows the seconds passed against ``expected_s``, so a long run is never
    silent.
    """
    _announce()
    if not _SHOWN.get():
        yield
        return
    from tqdm import tqdm

    bar = tqdm(
        total=round(expected_s),
        desc=desc,
        unit="s",
        file=sys.stderr,
        leave=False,
        bar_format="{desc}: {n:.0f}/~{total} s |{bar}|",
    )
    done = threading.Event()

    def tick() -> None:
        start = time.monotonic()
        while not done.wait(0.5):
            bar.n = min(time.monotonic() - start, bar.total)
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
        ticker.join()
        bar.close()
