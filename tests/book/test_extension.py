"""The book's Sphinx extension: computed numbers, tables, figures and their errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from .conftest import DOCS, ROOT

sys.path.insert(0, str(DOCS / "_ext"))
import aiinfra_book  # noqa: E402


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
    assert aiinfra_book.format_value(value, spec) == text


@pytest.mark.parametrize("target", ["busbw_factor(2)", ":x", "aiinfra.comm.results:"])
def test_evaluate_rejects_a_target_without_module_and_expression(target):
    with pytest.raises(ValueError, match="expected 'module:expression'"):
        aiinfra_book.evaluate(target)


def test_evaluate_runs_the_expression_in_the_module():
    assert (
        aiinfra_book.evaluate('aiinfra.comm.results:busbw_factor("all_reduce", 4)')
        == 1.5
    )


def _build(tmp_path, body: str) -> subprocess.CompletedProcess:
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['aiinfra_book']\n"
    )
    (src / "index.rst").write_text("Title\n=====\n\n" + textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E",
         str(src), str(tmp_path / "out")],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip


def test_calc_role_and_table_directive_render_computed_values(tmp_path):
    body = """
    Factor :calc:`aiinfra.comm.results:busbw_factor("all_reduce", 8)|.3f` here.

    .. aiinfra-table:: aiinfra.comm.results:busbw_factor_table(ns=(2, 4))

       Bus-bandwidth factors.
    """
    out = _build(tmp_path, body)
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "out" / "index.html").read_text()
    assert "Factor <span" in html and ">1.750</span>" in html
    assert "Bus-bandwidth factors." in html and "all_reduce" in html


@pytest.mark.parametrize(
    "body",
    [
        ":calc:`aiinfra.comm.results:no_such_function()`",
        ":calc:`no_module_given`",
        '.. aiinfra-table:: aiinfra.comm.results:busbw_factor("all_reduce", 4)',
        '.. aiinfra-figure:: aiinfra.comm.results:busbw_factor("all_reduce", 4)',
    ],
)
def test_a_broken_computation_fails_the_build(tmp_path, body):
    out = _build(tmp_path, body + "\n")
    assert out.returncode != 0
    assert "failed" in out.stderr
