"""The calculators in the page, in Chromium, in both editions.

Each check fills a form, presses the button and compares what the page shows with
what the ``aiinfra`` command prints for the command line the page says it ran (a
new Python process: the page's Pyodide and the reader's terminal must agree). The
page must fetch nothing from another host (Pyodide is part of the site), and a bad
value must show the command's message next to its field. The cold start (Pyodide
loads) and a warm run are timed and printed.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest

from tests.calculator.test_forms import TINY_CONFIG as TINY

from .chromium import _missing
from .conftest import ROOT, label, languages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(bool(_missing), reason=_missing or "ok"),
]

COLD_LIMIT_S = 90  # the first answer of a page: Pyodide's start (once per visit)
WARM_LIMIT_S = 10


class Calculator:
    def __init__(self, browser, url: str):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.context.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.section = self.page.locator("section.aiinfra-calculator").first

    def set(self, flag: str, value) -> None:
        field = self.section.locator(f'[data-flag="{flag}"]')
        tag = field.evaluate("e => e.tagName + ':' + e.type")
        if tag == "SELECT:select-one":
            field.select_option(value)
        elif tag.endswith("checkbox"):
            field.set_checked(bool(value))
        else:
            field.fill(str(value))

    def compute(self, timeout_s: float) -> float:
        start = time.monotonic()
        self.section.locator("button.calc-run").click()
        self.page.wait_for_function(
            "s => s.dataset.state && s.dataset.state !== 'running'",
            arg=self.section.element_handle(),
            timeout=timeout_s * 1000,
            polling=200,
        )
        return time.monotonic() - start

    @property
    def state(self) -> str:
        return self.section.get_attribute("data-state")

    def shown(self) -> tuple[list[str], list[list[str]]]:
        table = self.section.locator("table.calc-table")
        head = table.locator("thead th").all_inner_texts()
        rows = [
            r.locator("td").all_inner_texts() for r in table.locator("tbody tr").all()
        ]
        return head, rows

    def argv(self) -> list[str]:
        return shlex.split(self.section.locator(".calc-command code").inner_text())[1:]

    def foreign_hosts(self) -> set[str]:
        from urllib.parse import urlparse

        return {
            urlparse(u).hostname
            for u in self.requests
            if urlparse(u).scheme in ("http", "https", "ws", "wss")
        } - {"127.0.0.1"}


def cli_table(argv: list[str], config: str = "") -> dict:
    """The first table ``aiinfra`` prints for ``argv`` (config.json: ``config``)."""
    if "config.json" in argv:
        path = ROOT / "build" / "calc-test-config.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(config)
        argv = [str(path) if a == "config.json" else a for a in argv]
    done = subprocess.run(
        [sys.executable, "-m", "aiinfra.cli", *argv, "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return next(iter(json.loads(done.stdout)["tables"].values()))


def as_shown(value) -> str:
    """A cell as the terminal's JSON has it (integers with thousands commas)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def word(text: str, lang: str) -> str:
    """A result's word as the edition shows it: its label, or itself when it is a
    unit or an abbreviation that has none (``GiB``, ``tp``)."""
    key = f"calc_word:{text}"
    return label(key, lang) if key in languages.LABELS else text


def assert_equal_to_cli(calc: Calculator, lang: str, config: str = "") -> None:
    head, rows = calc.shown()
    table = cli_table(calc.argv(), config)
    assert head == [word(c, lang) for c in table["columns"]]
    assert len(rows) == len(table["rows"])
    for shown, printed in zip(rows, table["rows"], strict=True):
        for cell, value in zip(shown, printed, strict=True):
            if isinstance(value, str):
                assert cell == word(value, lang)
            else:
                assert cell == as_shown(value)


def test_the_memory_calculator_equals_the_command(browser, server, capsys):
    calc = Calculator(browser, f"{server}/en/training/memory.html")
    cold = calc.compute(COLD_LIMIT_S)
    assert calc.state == "done", calc.section.inner_text()
    assert_equal_to_cli(calc, "en")
    warm = []
    for flag, value in [("--model", "llama-3-70b"), ("--tp", "8"), ("--sp", True)]:
        calc.set(flag, value)
        warm.append(calc.compute(WARM_LIMIT_S))
        assert calc.state == "done"
        assert_equal_to_cli(calc, "en")
    calc.set("--model", "llama-3-405b")
    calc.set("--recompute", "full")
    warm.append(calc.compute(WARM_LIMIT_S))
    assert_equal_to_cli(calc, "en")
    # A pasted config.json of a tiny model, read as the file would be.
    calc.set("--model", "config.json")
    calc.set("--tp", "1")
    calc.set("--sp", False)
    calc.section.locator("textarea.calc-config").fill(TINY)
    calc.compute(WARM_LIMIT_S)
    assert calc.state == "done", calc.section.inner_text()
    assert calc.argv()[:3] == ["memory", "--config", "config.json"]
    assert_equal_to_cli(calc, "en", TINY)
    # The bars: one per part but the total, as the table says.
    assert calc.section.locator("svg.calc-figure rect").count() == 5
    # Bad input: the command's own words, next to the field; then a good run again.
    calc.set("--model", "llama-3-8b")
    calc.set("--seq", "-3")
    calc.compute(WARM_LIMIT_S)
    assert calc.state == "error"
    error = calc.section.locator('[data-flag="--seq"] + .calc-field-error')
    assert "argument --seq: must be an int >= 1, got '-3'" in error.inner_text()
    # Experts and latent attention are counted too: the page answers as the command.
    calc.set("--seq", "4096")
    for model in ("mixtral-8x7b", "deepseek-v3"):
        calc.set("--model", model)
        calc.compute(WARM_LIMIT_S)
        assert calc.state == "done", calc.section.inner_text()
        assert_equal_to_cli(calc, "en")
    calc.set("--model", "llama-3-8b")
    calc.compute(WARM_LIMIT_S)
    assert calc.state == "done"
    assert "Traceback" not in calc.section.inner_text()
    assert calc.foreign_hosts() == set(), calc.requests
    assert calc.errors == []
    with capsys.disabled():
        print(f"\ncalculator: cold {cold:.1f} s, warm {max(warm):.2f} s at most")
    calc.page.close()


@pytest.mark.parametrize(
    ("page", "values"),
    [
        (
            "training/planner",
            {"--model": "llama-3-405b", "--gpus": "16384", "--global-batch": "16M"},
        ),
        (
            "models/decoding",
            {"--model": "deepseek-v3", "--gpu": "H200", "--weights": "fp8"},
        ),
        (
            "overview/budget",
            {"--params": "7e10", "--tokens": "1.5e13", "--mfu": "0.35 0.45"},
        ),
    ],
)
def test_the_planner_and_budget_calculators_equal_the_command(
    browser, server, page, values
):
    calc = Calculator(browser, f"{server}/en/{page}.html")
    for flag, value in values.items():
        calc.set(flag, value)
    calc.compute(COLD_LIMIT_S)
    assert calc.state == "done", calc.section.inner_text()
    assert_equal_to_cli(calc, "en")
    assert calc.foreign_hosts() == set()
    calc.page.close()


def test_the_chinese_calculator_speaks_chinese(browser, server):
    calc = Calculator(browser, f"{server}/zh_CN/training/memory.html")
    name = calc.section.locator('label[for="calc-memory-seq"] .calc-name').inner_text()
    assert name == label("calc_field:--seq", "zh_CN") != "sequence length"
    calc.compute(COLD_LIMIT_S)
    assert calc.state == "done"
    assert_equal_to_cli(calc, "zh_CN")
    assert (
        label("calc_word:part", "zh_CN")
        in calc.section.locator("svg.calc-figure").text_content()
    )
    calc.set("--dp", "0")
    calc.compute(WARM_LIMIT_S)
    error = calc.section.locator('[data-flag="--dp"] + .calc-field-error')
    assert error.inner_text().startswith(label("calc_error", "zh_CN"))
    assert calc.foreign_hosts() == set()
    calc.page.close()


def test_only_the_site_has_calculators(site):
    """Decks, the single page, the EPUB's pages and the notebooks keep the tables."""
    page = (site / "en" / "training" / "memory.html").read_text()
    assert page.count('class="aiinfra-calculator"') == 1
    assert 'href="../api/memory.html#aiinfra.memory.calculator.memory_report"' in page
    zh = (site / "zh_CN" / "training" / "memory.html").read_text()
    assert "aiinfra.memory.calculator.memory_report" in zh  # linked to the English API
    for other in [
        *site.glob("slides/*/training/*.html"),
        *site.glob("*/training/memory.ipynb"),
    ]:
        assert "aiinfra-calculator" not in other.read_text(), other
    pyodide = site / "en" / "_static" / "pyodide"
    size = sum(p.stat().st_size for p in pyodide.iterdir())
    assert size < 15e6, size  # the site grows by this per edition
