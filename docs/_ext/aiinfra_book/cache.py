"""One disk cache for everything the book computes: values, tables and figures.

The four builds (two languages, book and decks) run in separate processes and ask
for the same values; the cache computes each once. An entry's key is the expression
and a *stamp* of everything the result depends on: the Python, torch, matplotlib and
package versions and a hash of the package's sources and of the data folder (the
measured results). Changing any of them changes every key, so nothing stale is read.

A file lock per key makes a second process wait for the first instead of computing
the same entry again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import pickle
import platform
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking, at worst twice the work
    fcntl = None


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


def tree_hash(
    *folders: pathlib.Path, suffixes: tuple[str, ...] = (".py", ".json")
) -> str:
    """SHA-256 of the names and bytes of every file with one of ``suffixes``."""
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix in suffixes and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(folder)).encode())
                h.update(b"\0")
                h.update(path.read_bytes())
    return h.hexdigest()


# The extension's own code that turns a result into what a page shows (how a figure
# is drawn for a slide, how a value is formatted): a change redraws every figure.
_DRAWING = ("figures.py", "compute.py")


def stamp(package: pathlib.Path, data: pathlib.Path) -> str:
    """What every cached result depends on, as one string."""
    versions = ";".join(
        f"{name}={_version(name)}" for name in ("torch", "matplotlib", "aiinfra")
    )
    here = pathlib.Path(__file__).parent
    drawing = hashlib.sha256(b"".join((here / f).read_bytes() for f in _DRAWING))
    return (
        f"python={platform.python_version()};{versions};"
        f"sources={tree_hash(package, data)[:20]};drawing={drawing.hexdigest()[:12]}"
    )


class Cache:
    """Pickled results in ``folder``, keyed by expression and :func:`stamp`.

    Args:
        folder: where the entries live (created on first write).
        package: the package's source folder (``reference/aiinfra``).
        data: the folder of measured results the package reads (``docs/_data``).
    """

    def __init__(
        self, folder: pathlib.Path, package: pathlib.Path, data: pathlib.Path
    ) -> None:
        self.folder = folder
        self.stamp = stamp(package, data)

    def _path(self, target: str) -> pathlib.Path:
        key = hashlib.sha256(f"{self.stamp}\0{target}".encode()).hexdigest()[:32]
        return self.folder / f"{key}.pickle"

    @contextlib.contextmanager
    def _locked(self, path: pathlib.Path) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def get(self, target: str, compute: Callable[[], Any]) -> Any:
        """The cached result of ``target``, computed by ``compute()`` on a miss.

        A result that cannot be pickled is returned but not stored.
        """
        path = self._path(target)
        if path.exists():
            return pickle.loads(path.read_bytes())
        with self._locked(path):
            if path.exists():  # another process computed it while we waited
                return pickle.loads(path.read_bytes())
            value = compute()
            try:
                blob = pickle.dumps(value)
            except (pickle.PicklingError, TypeError, AttributeError):
                return value
            fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)  # atomic: readers see all of it or nothing
            return value
