"""Prose names values, it does not compute them.

Every ``:calc:`` role, ``aiinfra-table``, ``aiinfra-figure`` and ``:frames:`` of a
page ``docs/<chapter>/<page>.rst`` calls a name of its own module,
``aiinfra.book.<chapter>.<page>`` (written bare), or of another page's module
(written ``aiinfra.book.<chapter>.<other>:name``), with literal arguments at most;
the name is defined there (not imported from elsewhere), and no results path, no
arithmetic and no constant is written in the rst. A chapter's package holds one
module per page that shows values, helpers its pages share in private modules
(``_common.py``), and an ``__init__`` with a docstring only. Every public name of a
page module is shown by some page.
"""

import ast
import collections
import importlib
import pathlib
import re

import pytest
from aiinfra_book.compute import page_module, split_target  # docs/_ext (conftest)

from .conftest import DOCS, ROOT

BOOK = ROOT / "reference" / "aiinfra" / "book"
TARGET = re.compile(
    r":calc:`(?P<calc>[^`]+)`|\.\. aiinfra-(?:figure|table):: (?P<directive>.+)"
    r"|^\s+:frames: (?P<frames>.+)",
    re.M,
)
CHAPTERS = sorted(p.parent.name for p in BOOK.glob("*/__init__.py"))


def targets(chapter: str) -> list[tuple[str, str, str]]:
    """(file:line, docname, target) of every computed value in a chapter's pages."""
    found = []
    for rst in sorted((DOCS / chapter).glob("*.rst")):
        text = rst.read_text(encoding="utf-8")
        for m in TARGET.finditer(text):
            target = (m["calc"] or m["directive"] or m["frames"]).strip()
            target = target.rsplit("|", 1)[0] if m["calc"] else target
            line = text.count("\n", 0, m.start()) + 1
            docname = f"{chapter}/{rst.stem}"
            found.append((f"{rst.relative_to(ROOT)}:{line}", docname, target))
    return found


def all_targets() -> list[tuple[str, str, str]]:
    return [t for c in sorted(p.name for p in DOCS.iterdir()) for t in targets(c)]


def page_modules(chapter: str) -> dict[str, pathlib.Path]:
    """``aiinfra.book.<chapter>.<page>`` -> its file, for every page module."""
    return {
        f"aiinfra.book.{chapter}.{p.stem}": p
        for p in sorted((BOOK / chapter).glob("*.py"))
        if not p.stem.startswith("_")
    }


PAGE_MODULES = {m: p for c in CHAPTERS for m, p in page_modules(c).items()}


def defined_names(path: pathlib.Path) -> set[str]:
    """Names a module defines at top level (def or assignment)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
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


def resolved(docname: str, target: str) -> tuple[str, str]:
    """(module, called name) of a page's target, as the build resolves it."""
    module, expression = split_target(target, page_module(docname))
    return module, called_name(expression)


def test_every_chapter_with_values_has_a_package():
    with_values = {c for c in (p.name for p in DOCS.iterdir()) if targets(c)}
    assert with_values == set(CHAPTERS)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_one_module_per_page_that_shows_its_own_values(chapter):
    """A page whose values are all other pages' (a questions page) needs none."""
    own = {
        page_module(docname)
        for _, docname, target in targets(chapter)
        if resolved(docname, target)[0] == page_module(docname)
    }
    assert own == set(page_modules(chapter))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_chapter_package_is_a_docstring(chapter):
    body = ast.parse((BOOK / chapter / "__init__.py").read_text(encoding="utf-8")).body
    assert len(body) == 1 and isinstance(body[0], ast.Expr), "no re-exports"
    assert isinstance(body[0].value, ast.Constant)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_pages_call_names_defined_in_a_page_module(chapter):
    for where, docname, target in targets(chapter):
        module, called = resolved(docname, target)
        assert module in PAGE_MODULES, f"{where}: {target}: not a page's module"
        defined = defined_names(PAGE_MODULES[module])
        assert called in defined, f"{where}: {called} is not defined in {module}"


def test_a_page_names_its_own_values_bare():
    for where, docname, target in all_targets():
        written = split_target(target, "(bare)")[0]
        assert written != page_module(docname), (
            f"{where}: {target}: the page's own module is written bare"
        )


def test_every_public_name_of_a_page_module_is_shown():
    used = collections.defaultdict(set)
    for _, docname, target in all_targets():
        module, called = resolved(docname, target)
        used[module].add(called)
    for name, path in PAGE_MODULES.items():
        module = importlib.import_module(name)
        public = {
            n
            for n in defined_names(path)
            if not n.startswith("_") and callable(getattr(module, n))
        }
        assert public <= used[name], f"{name}: shown by no page: {public - used[name]}"


def test_the_checks_catch_what_they_forbid():
    with pytest.raises(AssertionError):
        called_name('count_parameters(preset("llama-3-8b")).total * 2')
    with pytest.raises(AssertionError):
        called_name("ratio(DOCS / 'x.json')")
    assert called_name('step_time_ms("compute only", best_bucket=True)') == (
        "step_time_ms"
    )
    ddp = PAGE_MODULES["aiinfra.book.training.ddp"]
    assert "overlap_tokens" in defined_names(ddp)
    assert "MIB" not in defined_names(ddp)  # imported from memory, not defined
    assert resolved("training/zero_practice", "aiinfra.book.training.zero:f(1)") == (
        "aiinfra.book.training.zero",
        "f",
    )
    assert resolved("training/zero", "f(1)") == ("aiinfra.book.training.zero", "f")
