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
multi-rank examples spawn gloo ranks.
"""

from __future__ import annotations

import concurrent.futures
import html
import json
import os
import re
import sys
import time
import zipfile

import pytest

from .conftest import CHAPTERS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

LANGS = ["en", "zh_CN"]
SKIP_TAGS = {"gpu": "needs a CUDA GPU", "cluster": "needs a cluster of nodes"}
CELL_TIMEOUT = 300  # seconds; the slowest cell (a chapter's example) takes ~30 s


def notebooks(site, lang: str) -> list:
    return sorted(p for c in CHAPTERS for p in (site / lang / c).glob("*.ipynb"))


def _prepare(nb):
    """The notebook as the test runs it: a reset of the shared kernel first, and
    the cells that need a GPU or a cluster replaced by the message of their skip."""
    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        for tag, why in SKIP_TAGS.items():
            if tag in tags and cell.cell_type == "code":
                cell.source = f"print('skipped: {why}')"
    reset = nbformat.v4.new_code_cell("%reset -f")
    reset["id"] = "test-reset"
    nb.cells.insert(0, reset)
    return nb


def _execute(paths: list, cwd) -> dict:
    """Execute notebooks one after another in one kernel; ``path -> (nb, s)``."""
    from jupyter_client.manager import KernelManager

    env = dict(os.environ, MPLBACKEND="module://matplotlib_inline.backend_inline")
    env["OMP_NUM_THREADS"] = "1"
    km = KernelManager(kernel_name="python3")
    km.kernel_cmd = [
        sys.executable,
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]
    km.start_kernel(cwd=str(cwd), env=env)
    done = {}
    try:
        for path in paths:
            nb = _prepare(nbformat.read(path, as_version=4))
            t0 = time.perf_counter()
            client = nbclient.NotebookClient(
                nb, km=km, timeout=CELL_TIMEOUT, allow_errors=False
            )
            try:
                client.execute()
            except nbclient.exceptions.CellExecutionError as exc:
                pytest.fail(f"{path.relative_to(cwd)}: {exc}")
            done[path] = (nb, time.perf_counter() - t0)
    finally:
        km.shutdown_kernel(now=True)
    return done


@pytest.fixture(scope="module")
def executed(site):
    """Every notebook of every language executed: ``path -> (notebook, seconds)``.

    One kernel per language, the two side by side."""
    for lang in LANGS:
        assert notebooks(site, lang), f"no notebooks in {site / lang}"
    with concurrent.futures.ThreadPoolExecutor(len(LANGS)) as pool:
        futures = [pool.submit(_execute, notebooks(site, lg), site) for lg in LANGS]
        results = {}
        for f in futures:
            results.update(f.result())
    slowest = sorted(results.items(), key=lambda kv: -kv[1][1])[:5]
    total = sum(s for _, s in results.values())
    print(
        f"\n{len(results)} notebooks executed, {total:.0f} s of kernel time; slowest:"
    )
    for path, (_, seconds) in slowest:
        print(f"  {seconds:6.1f} s  {path.relative_to(site)}")
    return results


def _outputs(cell) -> str:
    text = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
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
    assert words and all(han.search(v) for v in words.values())


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
