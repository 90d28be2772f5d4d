"""The book builds cleanly and quotes only code that exists."""

from __future__ import annotations

import ast
import html
import os
import pathlib
import re
import shutil
import subprocess

import pytest

from .conftest import CHAPTERS, DOCS, ROOT

RST = sorted(p for p in DOCS.rglob("*.rst") if "locale" not in p.parts)


def test_every_edition_builds_with_warnings_as_errors(site):
    pages = ["index.html", "en/index.html", "zh_CN/index.html"]
    pages += [f"slides/{lang}/index.html" for lang in ("en", "zh_CN")]
    pages += [
        f"slides/{lang}/{chapter}/index.html"
        for lang in ("en", "zh_CN")
        for chapter in CHAPTERS
    ]
    for path in pages:
        assert (site / path).is_file(), path


def _literalincludes():
    pattern = re.compile(
        r"^(?P<indent>[ \t]*)\.\. literalinclude:: (?P<path>\S+)\n"
        r"(?P<opts>(?:(?P=indent)[ \t]+:.*\n)*)",
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
        # The package, or a deployable file the tests lint (deploy/Dockerfile).
        assert {ROOT / "reference", ROOT / "deploy"} & set(path.parents), (
            f"{rst.relative_to(ROOT)} quotes {target}: the book quotes only the "
            "reference package and deploy/"
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


def _toctree(index: pathlib.Path) -> list[str]:
    body = index.read_text(encoding="utf-8").split(".. toctree::", 1)[1]
    return re.findall(r"^   (\w[\w/-]*)\s*$", body, re.M)


def sections() -> list[pathlib.Path]:
    """Every section of every chapter, from the chapters' own toctrees."""
    return [
        DOCS / chapter / f"{name}.rst"
        for chapter in CHAPTERS
        for name in _toctree(DOCS / chapter / "index.rst")
    ]


def test_every_section_ends_with_key_points():
    missing = [
        str(s.relative_to(DOCS))
        for s in sections()
        if ":class: keypoints" not in s.read_text(encoding="utf-8")
    ]
    assert sections() and not missing, f"sections without key points: {missing}"


def test_every_public_module_of_the_package_has_an_api_entry(site):
    """The API pages are generated: each module pkgutil finds is documented."""
    import pkgutil

    def walk(folder: pathlib.Path, prefix: str):
        for m in pkgutil.iter_modules([str(folder)], prefix):
            if not m.name.rpartition(".")[2].startswith("_"):
                yield m.name
                if m.ispkg:
                    yield from walk(folder / m.name.rpartition(".")[2], m.name + ".")

    modules = set(walk(ROOT / "reference" / "aiinfra", "aiinfra."))
    html = "".join(
        p.read_text(encoding="utf-8") for p in (site / "en" / "api").glob("*.html")
    )
    anchors = set(re.findall(r'id="module-(aiinfra[\w.]*)"', html))
    assert modules and modules <= anchors, sorted(modules - anchors)


def test_each_listing_names_its_module_and_links_to_its_api_entry(site):
    checked = 0
    for rst, target, opts in _literalincludes():
        if not target.startswith("/../reference/"):
            continue  # a deploy/ file has no API entry
        page = rst.relative_to(DOCS).with_suffix(".html")
        html = (site / "en" / page).read_text(encoding="utf-8")
        module = ".".join(
            pathlib.PurePosixPath(target).with_suffix("").parts[3:]  # /../reference/
        ).removesuffix(".__init__")
        name = f"{module}.{opts['pyobject'].strip()}" if "pyobject" in opts else module
        links = re.findall(
            r'<p class="aiinfra-source"><a class="reference internal" '
            r'href="([^"]+)"[^>]*><code[^>]*><span class="pre">([^<]+)</span>',
            html,
        )
        hrefs = [href for href, text in links if text == name]
        assert hrefs, f"{page}: no source link for {name}"
        for href in hrefs:
            path, _, anchor = href.partition("#")
            api = (site / "en" / page).parent / path
            assert f'id="{anchor}"' in api.read_text(encoding="utf-8"), href
        checked += 1
    assert checked > 0


def test_each_chapter_has_a_deck_with_its_sections_and_a_link_to_the_book(site):
    for chapter in CHAPTERS:
        raw = (site / "slides" / "en" / chapter / "index.html").read_text("utf-8")
        deck = html.unescape(raw).replace("\u2019", "'").replace("\u201c", '"')
        deck = deck.replace("\u201d", '"')
        for section in _toctree(DOCS / chapter / "index.rst"):
            text = (DOCS / chapter / f"{section}.rst").read_text(encoding="utf-8")
            title = text.lstrip().splitlines()[0].strip()
            assert f"{title}<" in deck, f"{chapter} deck lacks {section} ({title!r})"
        assert f'href="../../../en/{chapter}/index.html"' in raw


def test_front_page_lists_every_chapter_with_its_deck(site):
    for lang in ("en", "zh_CN"):
        html = (site / lang / "index.html").read_text(encoding="utf-8")
        decks = re.findall(r'class="deck-link[^"]*" href="([^"]+)"', html)
        assert decks == [f"../slides/{lang}/{c}/index.html" for c in CHAPTERS]
        for deck in decks:
            assert ((site / lang) / deck).resolve().is_file(), deck


def test_no_chinese_page_shows_raw_markup(site):
    """A role that rst did not see (Chinese text touching it) leaks as raw text."""
    leaks = []
    for page in sorted((site / "zh_CN").rglob("*.html")):
        if "_static" in page.parts or "api" in page.parts:
            continue
        text = page.read_text(encoding="utf-8")
        # Code shows markup on purpose (the Translating page's examples).
        text = re.sub(r"<(code|pre)\b.*?</\1>", "", text, flags=re.S)
        text = re.sub(r"<[^>]+>", "", text)
        for m in re.finditer(r":(?:math|term|calc|cite:p|cite:t|doc|ref):`", text):
            leaks.append(
                f"{page.relative_to(site)}: {text[m.start() - 20 : m.end() + 20]}"
            )
    assert leaks == []


def _msgfmt_counts(po) -> tuple[int, int, int]:
    """(translated, fuzzy, untranslated) as GNU msgfmt counts them."""
    out = subprocess.run(
        ["msgfmt", "--statistics", "-o", "/dev/null", str(po)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LC_ALL": "C"},
    ).stderr

    def count(word: str) -> int:
        m = re.search(rf"(\d+) {word}", out)
        return int(m.group(1)) if m else 0

    return count("translated"), count("fuzzy"), count("untranslated")


def test_translation_status_page_counts_what_msgfmt_counts(site):
    if not shutil.which("msgfmt"):
        if os.environ.get("CI") == "true":
            raise RuntimeError("CI must run msgfmt (apt-get install gettext)")
        pytest.skip("no msgfmt (apt-get install gettext)")
    page = (site / "en" / "translating.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S)
    table = [
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td.*?</td>", r, re.S)]
        for r in rows
    ]
    table = [r for r in table if r]
    pos = sorted((DOCS / "locale").glob("*/LC_MESSAGES/*.po"))
    assert [(r[0], r[1]) for r in table] == [
        (p.parent.parent.name, p.stem) for p in pos
    ]
    for row, po in zip(table, pos, strict=True):
        translated, fuzzy, missing = _msgfmt_counts(po)
        assert [int(x) for x in row[2:6]] == [
            translated + fuzzy + missing,
            translated,
            fuzzy,
            missing,
        ], po.name
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row[6])


def test_side_by_side_builds_share_the_cores_among_their_torch_threads(
    book_tool, monkeypatch
):
    """Two builds on two cores: one torch thread each, unless the caller set one."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert book_tool.languages.build_env("en", 1)["OMP_NUM_THREADS"] == "1"
    # one build alone: torch's own choice
    assert "OMP_NUM_THREADS" not in book_tool.languages.build_env("en")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert book_tool.languages.build_env("zh_CN", 1)["OMP_NUM_THREADS"] == "3"
