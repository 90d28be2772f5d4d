"""Prose names values, it does not compute them.

Every ``:calc:`` role, ``aiinfra-table``, ``aiinfra-figure`` and ``:frames:`` in
``docs/<chapter>/*.rst`` calls a name of ``aiinfra.book.<chapter>`` defined (not
imported from elsewhere) in that chapter's module, or in one of its modules when the
chapter is a package (one module per page, re-exported by its ``__init__``), with
literal arguments at most; no results path, no arithmetic and no constant is written
in the rst. Every public name of a chapter module is shown by one of the chapter's
pages.
"""

import ast
import importlib
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BOOK = ROOT / "reference" / "aiinfra" / "book"
TARGET = re.compile(
    r":calc:`(?P<calc>[^`]+)`|\.\. aiinfra-(?:figure|table):: (?P<directive>.+)"
    r"|^\s+:frames: (?P<frames>.+)",
    re.M,
)
CHAPTERS = sorted(
    [p.stem for p in BOOK.glob("*.py") if p.stem != "__init__"]
    + [p.parent.name for p in BOOK.glob("*/__init__.py")]
)


def targets(chapter: str) -> list[tuple[str, str]]:
    """(file:line, target) of every computed value in a chapter's pages."""
    found = []
    for rst in sorted((DOCS / chapter).glob("*.rst")):
        text = rst.read_text(encoding="utf-8")
        for m in TARGET.finditer(text):
            target = (m["calc"] or m["directive"] or m["frames"]).strip()
            target = target.rsplit("|", 1)[0] if m["calc"] else target
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{rst.relative_to(ROOT)}:{line}", target))
    return found


def chapter_files(chapter: str) -> list[pathlib.Path]:
    """The chapter's module, or the modules of its package (not ``__init__``)."""
    if (BOOK / f"{chapter}.py").is_file():
        return [BOOK / f"{chapter}.py"]
    return sorted(p for p in (BOOK / chapter).glob("*.py") if p.stem != "__init__")


def defined_names(chapter: str) -> set[str]:
    """Names a chapter's module(s) define at top level (def or assignment)."""
    body = [
        node
        for path in chapter_files(chapter)
        for node in ast.parse(path.read_text(encoding="utf-8")).body
    ]
    names = set()
    for node in body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            for t in node.targets:
                if isinstance(t, ast.Tuple):
                    names |= {e.id for e in t.elts if isinstance(e, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def called_name(expression: str) -> str:
    """The name an expression calls; it must be ``NAME`` or ``NAME(literals)``."""
    node = ast.parse(expression, mode="eval").body
    if isinstance(node, ast.Name):
        return node.id
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name), expression
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        assert isinstance(arg, ast.Constant), f"{expression}: arguments are literals"
    return node.func.id


def test_every_chapter_with_pages_has_a_module():
    with_values = {c for c in (p.name for p in DOCS.iterdir()) if targets(c)}
    assert with_values == set(CHAPTERS)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_pages_call_names_defined_in_their_chapter_module(chapter):
    module = f"aiinfra.book.{chapter}"
    defined = defined_names(chapter)
    for where, target in targets(chapter):
        name, sep, expression = target.partition(":")
        assert sep and name == module, f"{where}: {target} is not from {module}"
        called = called_name(expression)
        assert called in defined, f"{where}: {called} is not defined in {module}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_public_name_of_a_chapter_module_is_shown(chapter):
    used = {called_name(t.partition(":")[2]) for _, t in targets(chapter)}
    module = importlib.import_module(f"aiinfra.book.{chapter}")
    public = {
        n
        for n in defined_names(chapter)
        if not n.startswith("_") and callable(getattr(module, n))
    }
    assert public <= used, f"not shown by any page: {sorted(public - used)}"


def test_the_checks_catch_what_they_forbid():
    with pytest.raises(AssertionError):
        called_name('count_parameters(preset("llama-3-8b")).total * 2')
    with pytest.raises(AssertionError):
        called_name("ratio(DOCS / 'x.json')")
    assert called_name('step_time_ms("compute only", best_bucket=True)') == (
        "step_time_ms"
    )
    assert "MIB" in defined_names("communication")
    assert "figures" not in defined_names("communication")  # imported, not defined
    assert "overlap_tokens" in defined_names("training")  # training/ddp.py
