"""One disk cache for everything the book computes: values, tables and figures.

The four builds (two languages, book and decks) run in separate processes and ask
for the same values; the cache computes each once. An entry's key is the expression
and what its result depends on:

- the *base*: the Python, torch, matplotlib, numpy and transformers versions and the
  extension's own drawing code (a change there redraws every figure);
- the *module key* of the module the expression is evaluated in: the bytes of that
  module and of every module of the package it imports, directly or not (read from
  the source with :mod:`ast`, imports inside functions included), the package data
  files in their folders (``comm/data/*.log``, ...), and the measured results
  (``docs/_data``) when one of those modules is :mod:`aiinfra.results` or names the
  data folder.

Editing one module of the package therefore recomputes only what imports it, and
Sphinx re-reads only the pages that show such a value (``compute._stale``).

A file lock per key makes a second process wait for the first instead of computing
the same entry again.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import pathlib
import pickle
import platform
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking, at worst twice the work
    fcntl = None

#: The distributions whose code the computations run: their versions key every entry.
VERSIONED = ("torch", "matplotlib", "numpy", "transformers", "aiinfra")
#: A module that reads the measured results: its dependents also key on the data.
RESULTS_MODULE = "results"
# A module that builds a path into the data folder (``"docs" / "_data"``).
_NAMES_DATA = re.compile(rb"[\"/]_data\b")


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


def base_stamp() -> str:
    """What every cached result depends on: versions and the drawing code."""
    versions = ";".join(f"{name}={_version(name)}" for name in VERSIONED)
    here = pathlib.Path(__file__).parent
    drawing = hashlib.sha256(b"".join((here / f).read_bytes() for f in _DRAWING))
    return (
        f"python={platform.python_version()};{versions};"
        f"drawing={drawing.hexdigest()[:12]}"
    )


class ImportGraph:
    """The modules of one package and which of its modules each imports.

    Args:
        package: the package's folder (its name is the folder's name).
    """

    def __init__(self, package: pathlib.Path) -> None:
        self.package = package
        self.name = package.name
        self.files: dict[str, pathlib.Path] = {}
        for path in sorted(package.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = [self.name, *path.relative_to(package).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            self.files[".".join(parts)] = path
        self._imports: dict[str, set[str]] = {}

    def _resolve(self, name: str) -> set[str]:
        """``a.b.c`` -> the package's modules that importing it runs (a, a.b, a.b.c)."""
        parts = name.split(".")
        return {
            ".".join(parts[:i])
            for i in range(1, len(parts) + 1)
            if ".".join(parts[:i]) in self.files
        }

    def imports(self, module: str) -> set[str]:
        """The package's modules that ``module`` imports, anywhere in its source."""
        if module not in self._imports:
            path = self.files[module]
            is_package = path.name == "__init__.py"
            here = module if is_package else module.rpartition(".")[0]
            found: set[str] = set()
            for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
                if isinstance(node, ast.Import):
                    for alias in node.names:
                        found |= self._resolve(alias.name)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = here.split(".")[: len(here.split(".")) - node.level + 1]
                        origin = ".".join(base + ([node.module] if node.module else []))
                    else:
                        origin = node.module or ""
                    found |= self._resolve(origin)
                    for alias in node.names:  # ``from a import b``: b may be a module
                        found |= self._resolve(f"{origin}.{alias.name}") - {origin}
            found.discard(module)
            self._imports[module] = found
        return self._imports[module]

    def closure(self, module: str) -> set[str]:
        """``module`` and every module of the package it imports, transitively.

        A module outside the package (``torch``) has an empty closure.
        """
        todo = list(self._resolve(module))
        seen: set[str] = set()
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += self.imports(m) - seen
        return seen


def _data_files(folder: pathlib.Path) -> set[pathlib.Path]:
    """The files of a package's folder that are not code: its own, and those of its
    subfolders that are not packages themselves (``data/``, ``crds/``)."""
    found = set()
    for path in folder.iterdir():
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            found.add(path)
        elif (
            path.is_dir()
            and path.name != "__pycache__"
            and not (path / "__init__.py").exists()
        ):
            found |= {p for p in path.rglob("*") if p.is_file()}
    return found


class Cache:
    """Pickled results in ``folder``, keyed by expression, base and module key.

    Args:
        folder: where the entries live (created on first write).
        package: the package's source folder (``reference/aiinfra``).
        data: the folder of measured results the package reads (``docs/_data``).
    """

    def __init__(
        self, folder: pathlib.Path, package: pathlib.Path, data: pathlib.Path
    ) -> None:
        self.folder = folder
        self.package = package
        self.data = data
        self.base = base_stamp()
        self._snapshot: tuple = ()
        self._checked = 0.0
        self._keys: dict[str | None, str] = {}
        self._graph: ImportGraph | None = None

    def _fresh(self) -> ImportGraph:
        """The import graph, read again whenever a file of the package changed
        (looked at no more than once a second: a build changes no source)."""
        if self._graph is not None and time.monotonic() - self._checked < 1.0:
            return self._graph
        self._checked = time.monotonic()
        snapshot = tuple(
            (str(p), p.stat().st_mtime_ns, p.stat().st_size)
            for folder in (self.package, self.data)
            for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        )
        if snapshot != self._snapshot or self._graph is None:
            self._snapshot, self._keys = snapshot, {}
            self._graph = ImportGraph(self.package)
        return self._graph

    def module_key(self, module: str | None) -> str:
        """What a result computed in ``module`` depends on (module docstring).

        ``None`` (a result of no one module) depends on the whole package.
        """
        graph = self._fresh()
        if module not in self._keys:
            modules = set(graph.files) if module is None else graph.closure(module)
            files = {graph.files[m] for m in modules}
            for folder in {f.parent for f in files}:  # package data beside them
                files |= _data_files(folder)
            h = hashlib.sha256()
            for path in sorted(files):
                h.update(str(path.relative_to(self.package)).encode() + b"\0")
                h.update(path.read_bytes())
            reads_data = f"{graph.name}.{RESULTS_MODULE}" in modules or any(
                _NAMES_DATA.search(graph.files[m].read_bytes()) for m in modules
            )
            if reads_data:
                h.update(tree_hash(self.data).encode())
            self._keys[module] = h.hexdigest()[:20]
        return self._keys[module]

    def key(self, target: str, module: str | None = None) -> str:
        """The full key of an entry: base, module key and the target itself."""
        text = f"{self.base}\0{self.module_key(module)}\0{target}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def _path(self, target: str, module: str | None) -> pathlib.Path:
        return self.folder / f"{self.key(target, module)}.pickle"

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

    def get(
        self, target: str, compute: Callable[[], Any], module: str | None = None
    ) -> Any:
        """The cached result of ``target``, computed by ``compute()`` on a miss.

        Args:
            target: what is computed (an expression, or a key naming a drawing).
            compute: computes it.
            module: the module whose code the result depends on (with what it
                imports); ``None``: the whole package.

        A result that cannot be pickled is returned but not stored.
        """
        path = self._path(target, module)
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
