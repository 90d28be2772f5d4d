"""Every page's notebook runs on the CPU and shows what the page shows.

The HTML build writes a notebook beside each page of a chapter
(``docs/_ext/aiinfra_book/notebooks.py``). Each is executed here with nbclient, top
to bottom, in a kernel of this environment (one kernel per language, reset between
notebooks: importing torch once instead of 67 times), and fails on any error. Then:

- the values the notebook prints are, in order, the values the page shows
  (``<span class="calc">``);
- each listing the notebook shows is the listing of the page, line for line;
- each table and figure of the page is a cell of the notebook, and draws;
- the chapter's example runs in its index notebook.

A cell tagged ``gpu`` or ``cluster`` would be skipped with a message saying so;
none is tagged today: every computation of the book runs on a laptop's CPU, and the
multi-rank examples spawn gloo ranks (``tests/book/run_notebooks.py`` runs them).
"""

from __future__ import annotations

import html
import json
import re
import zipfile

import pytest

from . import run_notebooks
from .conftest import CHAPTERS, EXECUTED, background_notebooks

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

LANGS = ["en", "zh_CN"]


def notebooks(site, lang: str) -> list:
    return run_notebooks.notebooks(site, lang)


@pytest.fixture(scope="module")
def executed(site):
    """Every notebook of every language executed: ``path -> (notebook, seconds)``.

    Run in the background right after the site's build (``tests/conftest.py``);
    otherwise (``AIINFRA_REUSE_SITE=1``) here, one kernel per language side by side.
    """
    for lang in LANGS:
        assert notebooks(site, lang), f"no notebooks in {site / lang}"
    running = background_notebooks()
    summary = EXECUTED / "summary.json"
    newest = max(p.stat().st_mtime for lg in LANGS for p in notebooks(site, lg))
    if running is None and summary.exists() and summary.stat().st_mtime > newest:
        # AIINFRA_REUSE_SITE=1 after a run: the notebooks have not changed since
        result = json.loads(summary.read_text(encoding="utf-8"))
    elif running is None:
        result = run_notebooks.run(site, EXECUTED, LANGS)
    else:
        proc, log = running
        proc.wait(timeout=1800)
        log.seek(0)
        output = log.read()
        if not summary.exists():
            pytest.fail(f"the notebooks did not run:\n{output[-3000:]}")
        result = json.loads(summary.read_text(encoding="utf-8"))
    failed = {k: v["error"] for k, v in result["notebooks"].items() if v["error"]}
    assert failed == {}
    slowest = sorted(result["notebooks"].items(), key=lambda kv: -kv[1]["seconds"])
    print(
        f"\n{len(result['notebooks'])} notebooks in {result['seconds']:.0f} s; slowest:"
    )
    for name, info in slowest[:5]:
        print(f"  {info['seconds']:6.1f} s  {name}")
    return {
        site / name: (nbformat.read(EXECUTED / name, as_version=4), info["seconds"])
        for name, info in result["notebooks"].items()
    }


def _outputs(cell) -> str:
    text = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream" and out.name == "stdout":
            text.append(out.text)
        elif "data" in out and "text/plain" in out.data:
            text.append(out.data["text/plain"])
    return "".join(text)


def _tagged(nb, tag: str) -> list:
    return [c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])]


def _page_values(page_html: str) -> list[str]:
    """The computed values a page shows, in order."""
    spans = re.findall(r'<span class="calc">(.*?)</span>', page_html, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", s)).strip() for s in spans]


def _page_listings(page_html: str) -> list[str]:
    """The text of every listing of the package a page quotes, in order."""
    found = []
    for block in re.findall(
        r'<div class="aiinfra-listing[^"]*">(.*?)<p class="aiinfra-source"',
        page_html,
        re.S,
    ):
        pre = re.search(r"<pre>(.*?)</pre>", block, re.S)
        found.append(html.unescape(re.sub(r"<[^>]+>", "", pre.group(1))))
    return found


def _norm(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_every_notebook_runs_and_prints_the_pages_values(executed, site, lang):
    paths = notebooks(site, lang)
    # one notebook per page of every chapter: its toctree and its index
    pages = sum(len(list((site / lang / c).glob("*.html"))) for c in CHAPTERS)
    assert len(paths) == pages
    bad, checked = [], 0
    for path in paths:
        nb, _ = executed[path]
        printed = [
            line
            for cell in _tagged(nb, "values")
            for line in _outputs(cell).splitlines()
        ]
        page = path.with_suffix(".html").read_text(encoding="utf-8")
        shown = _page_values(page)
        checked += len(shown)
        if printed != shown:
            diff = [(a, b) for a, b in zip(printed, shown, strict=False) if a != b]
            bad.append((path.name, len(printed), len(shown), diff[:3]))
    assert bad == []
    assert checked > 500  # the book shows about a thousand computed values


@pytest.mark.slow
@pytest.mark.parametrize("lang", LANGS)
def test_every_listing_table_and_figure_is_a_cell_that_draws(executed, site, lang):
    bad = []
    counts = {"listing": 0, "table": 0, "figure": 0}
    for path in notebooks(site, lang):
        nb, _ = executed[path]
        page = path.with_suffix(".html").read_text(encoding="utf-8")
        listings = [_outputs(c) for c in _tagged(nb, "listing")]
        expected = _page_listings(page)
        if [_norm(x) for x in listings] != [_norm(x) for x in expected]:
            bad.append((path.name, "listing"))
        tables = _tagged(nb, "table")
        figures = _tagged(nb, "figure")
        if len(tables) != len(
            re.findall(r'<table class="[^"]*\baiinfra-table\b', page)
        ):
            bad.append((path.name, "tables", len(tables)))
        if len(figures) != len(re.findall(r'<figure class="aiinfra-figure', page)):
            bad.append((path.name, "figures", len(figures)))
        for cell in figures:
            if not any("image/png" in o.get("data", {}) for o in cell.outputs):
                bad.append((path.name, "figure without image", cell.source[:60]))
        for cell in tables:
            if not any("text/markdown" in o.get("data", {}) for o in cell.outputs):
                bad.append((path.name, "table without output", cell.source[:60]))
        counts["listing"] += len(listings)
        counts["table"] += len(tables)
        counts["figure"] += len(figures)
    assert bad == []
    assert counts["listing"] > 100 and counts["table"] > 80 and counts["figure"] > 100


@pytest.mark.slow
def test_each_chapters_example_runs_in_its_index_notebook(executed, site):
    for chapter in CHAPTERS:
        nb, _ = executed[site / "en" / chapter / "index.ipynb"]
        cells = _tagged(nb, "example")
        assert len(cells) == 1, chapter
        assert len(_outputs(cells[0]).strip().splitlines()) >= 3, chapter


def test_the_notebooks_are_nbformat_4_and_say_where_they_come_from(site):
    for lang in LANGS:
        for path in notebooks(site, lang):
            nb = nbformat.read(path, as_version=4)
            nbformat.validate(nb)
            assert nb.nbformat == 4
            assert nb.metadata["aiinfra"]["language"] == lang
            first = nb.cells[0]
            assert first.cell_type == "markdown"
            assert f"({path.stem}.html)" in first.source or "http" in first.source
            setup = nb.cells[1]
            assert "setup" in setup.metadata["tags"]
            # a listing imports what it shows: no cell holds a copy of the package
            for cell in _tagged(nb, "listing"):
                assert cell.source.count("\n") <= 2, (path, cell.source[:80])
            # math stays TeX for Jupyter's MathJax
            prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
            assert "\\(" not in prose


def test_the_chinese_notebooks_speak_chinese(site):
    han = re.compile(r"[\u4e00-\u9fff]")
    for path in notebooks(site, "zh_CN"):
        nb = nbformat.read(path, as_version=4)
        prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert len(han.findall(prose)) > 50, path
    # the figures' and tables' words come translated with the notebook
    words = json.loads(
        re.search(
            r"WORDS = (\{.*?\n\})",
            nbformat.read(site / "zh_CN" / "communication" / "ring.ipynb", as_version=4)
            .cells[1]
            .source,
            re.S,
        ).group(1)
    )
    # (most are Chinese; a few are names Chinese engineers keep: AllGather)
    assert sum(bool(han.search(v)) for v in words.values()) > len(words) / 2


@pytest.mark.parametrize("lang", LANGS)
def test_one_zip_per_language_holds_every_notebook(site, lang):
    zipped = site / lang / "downloads" / f"aiinfra-notebooks-{lang}.zip"
    with zipfile.ZipFile(zipped) as z:
        names = sorted(z.namelist())
    expected = sorted(
        f"aiinfra-notebooks-{lang}/{p.relative_to(site / lang).as_posix()}"
        for p in notebooks(site, lang)
    )
    assert names == expected


@pytest.mark.parametrize("lang", LANGS)
def test_every_page_of_a_chapter_has_its_download_button(site, lang):
    for chapter in CHAPTERS:
        for page in (site / lang / chapter).glob("*.html"):
            text = page.read_text(encoding="utf-8")
            href = f'href="{page.stem}.ipynb" download'
            assert href in text, page
    assert ".ipynb" not in (site / lang / "glossary.html").read_text(encoding="utf-8")


def test_a_value_cell_imports_every_name_its_expression_uses():
    from aiinfra_book import notebooks

    assert notebooks.names_of("f(2) + LINKS['ib400'].bw * max(x for x in g())") == [
        "f",
        "LINKS",
        "g",
    ]
    lines = notebooks.imports(
        [
            "aiinfra.book.communication.ring:ring_bytes_8_ranks()",
            "aiinfra.book.communication.ring:ib400_alpha_us()",
            "aiinfra.comm.cost:LINKS['ib400']",
        ]
    )
    assert lines == [
        "from aiinfra.book.communication.ring import ring_bytes_8_ranks, "
        "ib400_alpha_us",
        "from aiinfra.comm.cost import LINKS",
    ]


def test_a_listing_cell_imports_what_it_shows():
    from aiinfra_book import notebooks

    cell = notebooks.listing_cell(
        {"module": "aiinfra.comm.ring", "pyobject": "Ring.step", "dedent": "4"}
    )
    assert (
        cell == "from aiinfra.comm.ring import Ring\nshow_source(Ring.step, dedent=4)"
    )
    region = notebooks.listing_cell(
        {
            "module": "aiinfra.comm.ring",
            "pyobject": "",
            "start-after": "# region x",
            "end-before": "# endregion",
            "dedent": None,
        }
    )
    assert region == (
        "show_source('aiinfra.comm.ring', start_after='# region x', "
        "end_before='# endregion', dedent='auto')"
    )
    docker = notebooks.listing_cell({"path": "deploy/Dockerfile", "language": "docker"})
    assert docker == "show_source('deploy/Dockerfile', language='docker')"


def test_the_front_page_takes_each_chapters_first_sentence():
    from aiinfra_book import front

    assert front.first_sentence("Training runs once; it waits. Then more.") == (
        "Training runs once; it waits."
    )
    assert front.first_sentence("训练只跑一次；推理一直在跑。其余的。") == (
        "训练只跑一次；推理一直在跑。"
    )
    assert front.first_sentence("e.g. the ring, 2.5 GB. Next") == (
        "e.g. the ring, 2.5 GB."
    )
