"""The book builds cleanly and quotes only code that exists."""

from __future__ import annotations

import ast
import importlib
import pathlib
import re

import pytest

from .conftest import DOCS, ROOT

RST = sorted(p for p in DOCS.rglob("*.rst") if "locale" not in p.parts)


def test_every_edition_builds_with_warnings_as_errors(site):
    for path in [
        "index.html",
        "en/index.html",
        "zh_CN/index.html",
        "slides/en/decks.html",
        "slides/zh_CN/decks.html",
    ]:
        assert (site / path).is_file(), path


def _literalincludes():
    pattern = re.compile(
        r"^(?P<indent>\s*)\.\. literalinclude:: (?P<path>\S+)\n"
        r"(?P<opts>(?:(?P=indent)\s+:.*\n)*)",
        re.M,
    )
    for rst in RST:
        for m in pattern.finditer(rst.read_text(encoding="utf-8")):
            opts = dict(re.findall(r":([\w-]+):\s*(.*)", m.group("opts")))
            yield rst, m.group("path"), opts


def _resolve(rst: pathlib.Path, target: str) -> pathlib.Path:
    if target.startswith("/"):
        return (DOCS / target.lstrip("/")).resolve()
    return (rst.parent / target).resolve()


def test_each_literalinclude_target_and_pyobject_exists():
    seen = 0
    for rst, target, opts in _literalincludes():
        path = _resolve(rst, target)
        assert path.is_file(), f"{rst.relative_to(ROOT)}: {target} does not exist"
        assert ROOT / "reference" in path.parents, (
            f"{rst.relative_to(ROOT)} quotes {target}: the book quotes only the "
            "reference package"
        )
        assert "lines" not in opts and "emphasize-lines" not in opts, (
            f"{rst.relative_to(ROOT)}: :lines: drifts silently; use :pyobject:"
        )
        if "pyobject" in opts:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = opts["pyobject"].strip().split(".")
            body = tree.body
            for name in names:
                match = [n for n in body if getattr(n, "name", None) == name]
                assert match, (
                    f"{rst.relative_to(ROOT)}: {opts['pyobject']} not in {target}"
                )
                body = getattr(match[0], "body", [])
        for key in ("start-after", "end-before"):
            if key in opts:
                assert opts[key].strip() in path.read_text(encoding="utf-8"), (
                    f"{rst.relative_to(ROOT)}: marker {opts[key]!r} not in {target}"
                )
        seen += 1
    assert seen > 0


def test_each_autodoc_target_imports():
    pattern = re.compile(r"^\s*\.\. auto(module|class|function):: (\S+)", re.M)
    seen = 0
    for rst in RST:
        for kind, target in pattern.findall(rst.read_text(encoding="utf-8")):
            if kind == "module":
                importlib.import_module(target)
            else:
                module, _, name = target.rpartition(".")
                assert hasattr(importlib.import_module(module), name), target
            seen += 1
    assert seen > 0


@pytest.mark.parametrize(
    "deck", sorted(DOCS.glob("*/slides.rst")), ids=lambda p: p.parent.name
)
def test_each_deck_includes_exactly_its_chapters_sections(deck):
    index = (deck.parent / "index.rst").read_text(encoding="utf-8")
    toc = re.findall(r"^   (\w[\w/-]*)\s*$", index.split(".. toctree::", 1)[1], re.M)
    included = re.findall(
        r"^\.\. include:: (\S+)\.rst", deck.read_text(encoding="utf-8"), re.M
    )
    assert included == toc, "the deck must follow the chapter's toctree"
    assert ":booklink:" in deck.read_text(encoding="utf-8"), (
        "a deck links back to the book"
    )


def test_every_section_ends_with_key_points():
    for deck in DOCS.glob("*/slides.rst"):
        for name in re.findall(
            r"^\.\. include:: (\S+)", deck.read_text(encoding="utf-8"), re.M
        ):
            text = (deck.parent / name).read_text(encoding="utf-8")
            assert ":class: keypoints" in text, (
                f"{deck.parent.name}/{name} has no key points"
            )
