"""The book's Sphinx extension, piece by piece: formats, the cache, what counts as
words, the chapter list, the generated API pages, figure text, and a broken
computation failing the build."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from .conftest import DOCS, ROOT

sys.path.insert(0, str(DOCS / "_ext"))
from aiinfra_book import api, cache, chapters, compute, figures  # noqa: E402


@pytest.mark.parametrize(
    ("value", "spec", "text"),
    [
        (2**30, "bytes", "1 GiB"),
        (1536, "bytes", "1.5 KiB"),
        (512, "bytes", "512 B"),
        (1.5e9, "si", "1.5 G"),
        (0.4213, "pct", "42.1 %"),
        (1234567, ",", "1,234,567"),
        (0.123456, ".3f", "0.123"),
        (7, "", "7"),
    ],
)
def test_format_value(value, spec, text):
    assert compute.format_value(value, spec) == text


PAGE = "aiinfra.book.models.flash_attention"


@pytest.mark.parametrize(
    ("target", "module", "expression"),
    [
        ("busbw_factor_table()", PAGE, "busbw_factor_table()"),
        ("aiinfra.comm.cost:LINKS", "aiinfra.comm.cost", "LINKS"),
        (" aiinfra.book.training.zero : f(1) ", "aiinfra.book.training.zero", "f(1)"),
        # A ":" inside the expression is no module: a slice, a dict, a lambda, a
        # walrus, a format spec, a prefix that is not a dotted name of the package.
        ("x[1:2]", PAGE, "x[1:2]"),
        ("{'a': 1}['a']", PAGE, "{'a': 1}['a']"),
        ("(lambda: 3)()", PAGE, "(lambda: 3)()"),
        ("aiinfra.x := 1", PAGE, "aiinfra.x := 1"),
        ("f'{x:.3f}'", PAGE, "f'{x:.3f}'"),
        ("math:comb(5, 2)", PAGE, "math:comb(5, 2)"),
        ("aiinfra:x", PAGE, "aiinfra:x"),
        ("aiinfra_x.y:z", PAGE, "aiinfra_x.y:z"),
    ],
)
def test_a_target_names_its_module_or_is_the_pages(target, module, expression):
    assert compute.split_target(target, PAGE) == (module, expression)


@pytest.mark.parametrize("target", ["busbw_factor(2)", "aiinfra.comm.results:", " "])
def test_evaluate_rejects_a_target_without_module_or_expression(target):
    with pytest.raises(ValueError, match="expected 'expression'"):
        compute.evaluate(target)


def test_a_page_module_is_named_after_the_page():
    assert compute.page_module("models/flash_attention") == (
        "aiinfra.book.models.flash_attention"
    )


def test_evaluate_runs_the_expression_in_the_module():
    assert compute.evaluate("comb(5, 2) + pi * 0", module="math") == 10
    assert compute.evaluate("aiinfra.report:Table.__name__", module="math") == "Table"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("sequence length N", True),
        ("peak MiB (forward + backward)", True),
        ("time ($\\mu$s)", True),
        ("fp16", False),  # a name with a digit
        ("Llama-3-8B", False),
        ("64 MiB", False),  # a size
        ("r0", False),
        ("ring_all_reduce", False),  # code
        ("1.5e+09", False),
        ("$\\alpha$", False),  # math only
        ("p", False),
        ("attainable TFLOP/s (BF16)", True),  # a sentence around a name
        ("H100, 8192 tokens", True),
        ("Llama 3 8B", False),  # a name only
        ("H100 (80 GB)", False),
        ("1.5e+09 s", False),
        ("v0.19.8", False),
    ],
)
def test_only_words_are_messages(text, words):
    assert compute.is_words(text) is words


def test_a_tables_words_columns_are_messages_and_the_rest_is_not():
    rows = [["air cooled", "measured text", "liquid", 3]]
    table = compute.table_nodes(
        *(["rack", "log", "cooling", "n"], rows, "", "", "", "p.rst", 1),
        words=(0, 2),
    )[0]
    cells = [e[0] for e in table.findall(lambda n: n.tagname == "entry")][4:]
    # gettext extracts a paragraph that has a source: the words columns only
    assert [c.astext() for c in cells if c.source] == ["air cooled", "liquid"]


def _stub_package(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    package, data = tmp_path / "pkg", tmp_path / "data"
    package.mkdir()
    data.mkdir()
    (package / "a.py").write_text("X = 1\n")
    (data / "r.json").write_text("{}")
    return package, data


def test_cache_computes_once_and_returns_the_stored_value(tmp_path):
    package, data = _stub_package(tmp_path)
    calls = []
    store = cache.Cache(tmp_path / "c", package, data)
    first = store.get("m:f()", lambda: calls.append(1) or {"v": 3})
    again = cache.Cache(tmp_path / "c", package, data).get("m:f()", lambda: 1 / 0)
    assert first == again == {"v": 3} and calls == [1]


@pytest.mark.parametrize("changed", ["a.py", "r.json"])
def test_cache_key_changes_with_the_sources_and_the_data(tmp_path, changed):
    package, data = _stub_package(tmp_path)
    (package / "results.py").write_text("DATA = 'docs/_data'\n")
    (package / "b.py").write_text("from pkg import a, results\n")
    before = cache.Cache(tmp_path / "c", package, data)
    before.get("m:f()", lambda: "old", module="pkg.b")
    key = before.key("m:f()", "pkg.b")
    (package / changed if changed.endswith(".py") else data / changed).write_text("2")
    after = cache.Cache(tmp_path / "c", package, data)
    assert after.key("m:f()", "pkg.b") != key
    assert after.get("m:f()", lambda: "new", module="pkg.b") == "new"


def test_a_module_key_follows_what_the_module_imports_and_nothing_else(tmp_path):
    package, data = _stub_package(tmp_path)
    sub = package / "sub"
    sub.mkdir()
    (sub / "__init__.py").write_text("")
    (sub / "leaf.py").write_text("Y = 2\n")
    (sub / "data").mkdir()
    (sub / "data" / "table.csv").write_text("a,b\n")
    # relative, aliased and function-level imports all count
    (sub / "mid.py").write_text("from . import leaf\n")
    (package / "page.py").write_text("def f():\n    import pkg.sub.mid as m\n")
    (package / "other.py").write_text("import torch\nfrom pkg import a\n")
    graph = cache.ImportGraph(package)
    page_closure = {"pkg.page", "pkg.sub", "pkg.sub.mid", "pkg.sub.leaf"}
    assert graph.closure("pkg.page") == page_closure
    assert graph.closure("pkg.other") == {"pkg.other", "pkg.a"}
    store = cache.Cache(tmp_path / "c", package, data)
    page, other = store.module_key("pkg.page"), store.module_key("pkg.other")
    import time

    time.sleep(1.1)  # the cache looks for changed files at most once a second
    (sub / "leaf.py").write_text("Y = 3\n")
    assert store.module_key("pkg.page") != page
    assert store.module_key("pkg.other") == other  # it does not import the leaf
    page = store.module_key("pkg.page")
    time.sleep(1.1)
    (sub / "data" / "table.csv").write_text("a,b\n1,2\n")  # package data beside it
    assert store.module_key("pkg.page") != page
    assert store.module_key("pkg.other") == other
    # A results file matters only to modules that read results.
    time.sleep(1.1)
    (data / "r.json").write_text('{"x": 1}')
    assert store.module_key("pkg.other") == other


def test_cache_base_names_the_python_torch_and_package_versions():
    import platform

    import torch

    base = cache.base_stamp()
    assert f"python={platform.python_version()}" in base
    assert f"torch={torch.__version__}" in base
    assert re.search(r"aiinfra=\d", base)


def test_chapters_are_the_entries_of_the_toctree_named_chapters(tmp_path):
    (tmp_path / "index.rst").write_text(
        "T\n=\n\n.. toctree::\n   :caption: Reference\n\n   glossary\n\n"
        ".. toctree::\n   :hidden:\n   :name: chapters\n\n   b/index\n   a/index\n"
    )
    assert chapters.chapters(tmp_path) == ["b", "a"]


@pytest.mark.parametrize(
    ("toctree", "match"),
    [
        ("   :maxdepth: 1\n\n   a/index\n", "no toctree with ':name: chapters'"),
        ("   :name: chapters\n\n   a/intro\n", "is not '<folder>/index'"),
    ],
)
def test_chapters_rejects_a_root_without_a_proper_chapters_toctree(
    tmp_path, toctree, match
):
    (tmp_path / "index.rst").write_text(f"T\n=\n\n.. toctree::\n{toctree}")
    with pytest.raises(ValueError, match=match):
        chapters.chapters(tmp_path)


def test_api_pages_follow_the_package_folders(tmp_path):
    package = tmp_path / "aiinfra"
    (package / "comm").mkdir(parents=True)
    (package / "newpkg" / "deep").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Root."""\n')
    (package / "report.py").write_text("")
    (package / "comm" / "__init__.py").write_text('"""Collectives.\n\nMore."""\n')
    (package / "comm" / "ring.py").write_text("")
    (package / "comm" / "_validate.py").write_text("")
    (package / "newpkg" / "__init__.py").write_text("")
    (package / "newpkg" / "deep" / "__init__.py").write_text("")
    (package / "newpkg" / "deep" / "x.py").write_text("")
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "gone.rst").write_text(api.MARK + "\n")  # a removed subpackage's page
    (folder / "index.rst").write_text("kept")
    assert api.write_api_pages(folder, package) == ["aiinfra", "comm", "newpkg"]
    assert sorted(p.name for p in folder.glob("*.rst")) == [
        "aiinfra.rst",
        "comm.rst",
        "index.rst",
        "newpkg.rst",
    ]
    comm = (folder / "comm.rst").read_text()
    assert "Collectives (aiinfra.comm)\n==========================" in comm
    modules = re.findall(r"^\.\. automodule:: (\S+)\n   :members:", comm, re.M)
    assert modules == ["aiinfra.comm.ring"]  # not the private _validate
    new = (folder / "newpkg.rst").read_text()
    assert re.findall(r"automodule:: (\S+)\n   :members:", new) == [
        "aiinfra.newpkg.deep.x"
    ]
    root = (folder / "aiinfra.rst").read_text()
    assert "aiinfra.report" in root and "aiinfra.comm.ring" not in root


def _figure():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    ax.bar(["ring", "tree"], [1, 2], label="measured time")
    ax.set_xlabel("algorithm")
    ax.set_ylabel("time (us)")
    ax.set_title("all-reduce on 8 ranks")  # words around a number: translated
    ax.annotate("crossover", (0, 1))
    ax.legend()
    return fig


def test_figure_strings_are_the_words_a_reader_reads():
    assert figures.figure_strings(_figure()) == [
        "all-reduce on 8 ranks",  # a number inside a sentence
        "algorithm",
        "time (us)",
        "crossover",
        "measured time",
        "ring",
        "tree",
    ]


def test_a_figure_is_drawn_with_its_words_translated_in_a_cjk_font():
    assert figures.cjk_fonts() == ["Noto Sans SC"], "the docs extra pins the font"
    zh = {"algorithm": "算法", "ring": "环形", "measured time": "实测时间"}
    svg = figures.render_svg(_figure(), zh, cjk=True)
    texts = re.findall(r"<!-- (.*?) -->", svg)
    # The category tick label is redrawn at save time: it must stay translated.
    assert {"算法", "环形", "实测时间", "tree", "all-reduce on 8 ranks"} <= set(texts)
    assert "algorithm" not in texts and "ring" not in texts
    # Glyphs drawn as paths from the CJK font, so no reader needs the font.
    assert 'id="NotoSansSC-Regular-' in svg


def test_a_translated_label_with_math_draws_its_chinese_glyphs(caplog):
    # mathtext lays out a "$...$" text in the first font of its family only: the
    # CJK font must come first there, or every Chinese character is a dummy box.
    assert figures.cjk_fonts() == ["Noto Sans SC"], "the docs extra pins the font"
    from matplotlib.figure import Figure

    fig = Figure()
    fig.add_subplot().set_xlabel("segments $c$")
    with caplog.at_level("WARNING", logger="matplotlib"):
        svg = figures.render_svg(fig, {"segments $c$": "分段数 $c$"}, cjk=True)
    assert not [r for r in caplog.records if "does not have a glyph" in r.message]
    assert 'id="NotoSansSC-Regular-' in svg


def _build(
    tmp_path, body: str, keep_going: bool = False
) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['aiinfra_book']\n"
        f"aiinfra_cache_dir = {str(tmp_path / 'cache')!r}\n"
        f"aiinfra_figure_dir = {str(tmp_path / 'figures')!r}\n"
    )
    (src / "index.rst").write_text("Title\n=====\n\n" + textwrap.dedent(body))
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E"]
    cmd += ["--keep-going"] if keep_going else []
    return subprocess.run(
        [*cmd, str(src), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_calc_role_and_table_directive_render_computed_values(tmp_path):
    body = """
    Factor :calc:`aiinfra.comm.results:busbw_factor("all_reduce", 8)|.3f` here.

    .. aiinfra-table:: aiinfra.report:Table(["kind", "n"], [["ring", 1]], "N.", "s")

       Bus-bandwidth factors of :math:`p` ranks in ``fp16``.

    .. aiinfra-table:: aiinfra.results:load_optional("roofline", "cuda", "/absent")

       A GPU's results where a file exists: here none, so nothing at all.
    """
    out = _build(tmp_path, body)
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "out" / "index.html").read_text()
    assert "Factor <span" in html and ">1.750</span>" in html
    assert "Bus-bandwidth factors of" in html and "ring" in html
    # The caption's markup renders: maths and a literal, not their rst source.
    caption = re.search(r"<caption>(.*?)</caption>", html, re.S).group(1)
    assert ":math:" not in caption and "``" not in caption
    assert 'class="math' in caption and '<code class="docutils literal' in caption
    assert '<p class="aiinfra-table-note">N.</p>' in html
    assert '<p class="aiinfra-table-note aiinfra-table-stamp">s</p>' in html
    assert html.count("<table") == 1 and "nothing at all" not in html


BROKEN = {  # the source of a broken computation -> what its error must name
    ":calc:`aiinfra.comm.results:no_such_function()`": "no_such_function",
    ":calc:`no_module_given`": "no_module_given",
    '.. aiinfra-table:: aiinfra.comm.results:busbw_factor("all_reduce", 4)': (
        "aiinfra-table"
    ),
    '.. aiinfra-figure:: aiinfra.comm.results:busbw_factor("all_reduce", 4)': (
        "aiinfra-figure"
    ),
}


def test_each_broken_computation_fails_the_build_and_is_named(tmp_path):
    """One build of four broken computations (``--keep-going``): each is reported."""
    out = _build(tmp_path, "\n\n".join(BROKEN) + "\n", keep_going=True)
    assert out.returncode != 0
    errors = [line for line in out.stderr.splitlines() if "failed" in line]
    for source, named in BROKEN.items():
        assert any(named in line for line in errors), (source, out.stderr)


def test_a_new_bib_file_is_cited_in_an_incremental_build(tmp_path):
    # A bibliography keeps the bib files it saw when its page was read: without
    # re-reading that page, an incremental build misses every key of a new file.
    src = tmp_path / "src"
    (src / "_bib").mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import pathlib, sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['sphinxcontrib.bibtex', 'aiinfra_book']\n"
        f"aiinfra_cache_dir = {str(tmp_path / 'cache')!r}\n"
        "bibtex_bibfiles = sorted(str(p) for p in "
        "(pathlib.Path(__file__).parent / '_bib').glob('*.bib'))\n"
    )
    entry = "@misc{{{key}, author = {{A. Author}}, title = {{T}}, year = {{2024}}}}\n"
    (src / "_bib" / "a.bib").write_text(entry.format(key="old2024"))
    (src / "refs.rst").write_text("Refs\n====\n\n.. bibliography::\n")
    page = "Title\n=====\n\nSee :cite:p:`{}`.\n\n.. toctree::\n\n   refs\n"
    (src / "index.rst").write_text(page.format("old2024"))
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q"]
    cmd += ["-d", str(tmp_path / "doctrees"), str(src), str(tmp_path / "out")]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert first.returncode == 0, first.stderr
    (src / "_bib" / "b.bib").write_text(entry.format(key="new2025"))
    (src / "index.rst").write_text(page.format("old2024,new2025"))
    again = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "new2025" not in again.stderr
