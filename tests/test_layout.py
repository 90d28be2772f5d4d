"""The package's import graph reads one way.

Every ``import`` and ``from ... import`` of every module of ``reference/aiinfra`` is
read with :mod:`ast`, at any depth (inside a function, under ``TYPE_CHECKING``), so
an import hidden in a function still counts. Three rules:

- no circle between modules (``a`` imports ``b`` imports ... ``a``);
- the ground floor, the modules at the package root (results, report, the
  accelerators' datasheets, ...), imports no chapter package: every package may
  read it;
- the chapter packages (``aiinfra.comm``, ``aiinfra.models``, ...) import one another
  one way, with :mod:`aiinfra.book`, which shows them all, on top.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "reference" / "aiinfra"
TOP = "aiinfra.cli"  # the command: it finds every chapter's cli.py by name


def module_names(package: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted name -> file of every module of ``package`` (a package is its
    ``__init__``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` imports, anywhere in its file.

    ``from p import x`` imports ``p.x`` where that is a module, else ``p``; a
    relative import is made absolute first.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[: len(here) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    out = set()
    for m in found:
        while m and m not in known:
            m = m.rpartition(".")[0]
        if m and m != name:
            out.add(m)
    return out


def graph(package: pathlib.Path = PACKAGE) -> dict[str, set[str]]:
    names = module_names(package)
    return {n: imports(n, p, set(names)) for n, p in names.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def chapter(module: str) -> str:
    """``aiinfra.models.moe.layer`` -> ``aiinfra.models``; root modules are
    themselves."""
    return ".".join(module.split(".")[:2])


def ground_floor(edges: dict[str, set[str]]) -> set[str]:
    """The package itself and the modules at its root, but the command."""
    packages = {chapter(m) for m in edges if m.count(".") >= 2}
    root = {m for m in edges if m.count(".") == 1} - packages - {TOP}
    return root | {"aiinfra"}


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph()


def test_no_module_imports_itself_back(edges):
    assert circles(edges) == []


def test_the_ground_floor_imports_no_chapter_package(edges):
    ground = ground_floor(edges)
    assert {"aiinfra.report", "aiinfra.results", "aiinfra.accelerators"} <= ground
    wrong = {m: sorted(edges[m] - ground) for m in ground if edges[m] - ground}
    assert wrong == {}


def test_chapter_packages_import_one_way(edges):
    ground = ground_floor(edges)
    packages: dict[str, set[str]] = {}
    for a, targets in edges.items():
        if a in ground or a == TOP:
            continue
        packages.setdefault(chapter(a), set())
        packages[chapter(a)] |= {chapter(b) for b in targets - ground} - {chapter(a)}
    assert circles(packages) == []
    assert all("aiinfra.book" not in t for p, t in packages.items()), "book is on top"


def test_the_reader_sees_every_kind_of_import(tmp_path):
    pkg = tmp_path / "aiinfra"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ground.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from aiinfra.sub.b import X\n"
    )
    (pkg / "sub" / "b.py").write_text(
        "import aiinfra.ground\n\ndef f():\n    from .a import Y\n"
    )
    edges = graph(pkg)
    assert edges["aiinfra.sub"] == {"aiinfra.sub.a"}
    assert edges["aiinfra.sub.a"] == {"aiinfra.sub.b"}
    assert edges["aiinfra.sub.b"] == {"aiinfra.ground", "aiinfra.sub.a"}
    assert circles(edges) == [["aiinfra.sub.a", "aiinfra.sub.b"]]
