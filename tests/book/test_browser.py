"""The built site in a real browser (headless Chromium driven by Playwright).

Skipped with a reason where Chromium or Playwright is missing, except under CI
(``CI=true``), where a missing browser is a failure.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

import pytest

from .chromium import _missing
from .conftest import CHAPTERS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(bool(_missing), reason=_missing or "ok"),
]


class Page:
    """A page that records every request and every failed response."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1280, "height": 800})
        self.requests: list[str] = []
        self.failures: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("requestfailed", lambda r: self.failures.append(f"{r.url} failed"))
        self.page.on(
            "response",
            lambda r: r.status >= 400 and self.failures.append(f"{r.url} {r.status}"),
        )

    def foreign_hosts(self) -> set[str]:
        hosts = {
            urlparse(u).hostname
            for u in self.requests
            if urlparse(u).scheme in ("http", "https", "ws", "wss")
        }
        return hosts - {"127.0.0.1"}


@pytest.fixture
def page(browser):
    p = Page(browser)
    yield p
    p.page.close()


# Draw a character on a canvas in the element's font and compare its pixels with
# those of a character no font has (U+FFFF): equal pixels mean a tofu box.
TOFU_JS = """(el) => {
  const font = '40px ' + getComputedStyle(el).fontFamily;
  const draw = (ch) => {
    const c = document.createElement('canvas'); c.width = 64; c.height = 64;
    const g = c.getContext('2d'); g.font = font;
    g.fillText(ch, 4, 48); return Array.from(g.getImageData(0, 0, 64, 64).data).join();
  };
  const tofu = draw('\\uffff');
  const chars = Array.from(el.textContent).filter(ch => /[\\u4e00-\\u9fff]/.test(ch));
  return {chars: chars.length, tofu: chars.filter(ch => draw(ch) === tofu)};
}"""


def _first_cjk_heading(page):
    return page.locator("article h1").first


def test_english_page_renders_its_text(page, server):
    page.page.goto(f"{server}/en/communication/index.html")
    title = _first_cjk_heading(page.page).inner_text()
    assert "Collective communication" in title
    assert page.page.locator("html").get_attribute("lang") == "en"
    assert page.foreign_hosts() == set(), page.requests
    assert page.failures == []


def test_chinese_page_renders_chinese_glyphs_not_tofu(page, server):
    page.page.goto(f"{server}/zh_CN/communication/index.html")
    page.page.wait_for_load_state("networkidle")
    heading = _first_cjk_heading(page.page)
    result = heading.evaluate(TOFU_JS)
    assert result["chars"] >= 2, f"no Chinese heading: {heading.inner_text()!r}"
    assert result["tofu"] == [], f"rendered as tofu boxes: {result['tofu']}"
    body = page.page.locator("article").inner_text()
    assert len(re.findall(r"[\u4e00-\u9fff]", body)) > 50, "the page is not in Chinese"
    assert page.foreign_hosts() == set(), page.requests
    assert page.failures == []


@pytest.mark.parametrize(("start", "other"), [("en", "zh_CN"), ("zh_CN", "en")])
def test_language_switch_lands_on_the_counterpart_page(page, server, start, other):
    page.page.goto(f"{server}/{start}/communication/index.html")
    page.page.locator("a.aiinfra-lang-switch").first.click()
    page.page.wait_for_load_state("load")
    assert page.page.url == f"{server}/{other}/communication/index.html"
    assert page.page.locator("html").get_attribute("lang") == other.replace("_", "-")


def test_math_renders_from_the_site_itself(page, server):
    page.page.goto(f"{server}/en/notation.html")
    page.page.wait_for_selector("mjx-container svg", timeout=20_000)
    assert page.foreign_hosts() == set(), page.requests
    assert page.failures == []


@pytest.mark.parametrize(
    ("lang", "query", "page_name"),
    [
        ("en", "Rabenseifner", "communication/doubling"),
        ("zh_CN", "全归约", "glossary"),  # a glossary term: jieba's user dictionary
        ("zh_CN", "递归倍增", "communication/doubling"),
    ],
)
def test_search_finds_the_page_in_its_language(page, server, lang, query, page_name):
    page.page.goto(f"{server}/{lang}/search.html?q={query}")
    page.page.wait_for_selector("#search-results ul.search li", timeout=20_000)
    links = page.page.locator("#search-results ul.search li a").evaluate_all(
        "els => els.map(e => e.getAttribute('href'))"
    )
    assert any(h.startswith(page_name) for h in links), links


@pytest.mark.parametrize(("locale", "lang"), [("en-US", "en"), ("zh-CN", "zh_CN")])
def test_site_root_leads_to_the_front_page_in_the_readers_language(
    browser, server, locale, lang
):
    context = browser.new_context(locale=locale)
    try:
        tab = context.new_page()
        tab.goto(f"{server}/")
        tab.wait_for_url(f"{server}/{lang}/index.html", timeout=20_000)
        # The front page is a page of the book: its theme, its chapter list, decks.
        assert tab.locator("article .aiinfra-chapter-card").count() == len(CHAPTERS)
        assert tab.locator(".bd-sidebar-primary").count() == 1
        tab.locator("a.deck-link").first.click()
        tab.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
        assert tab.url == f"{server}/slides/{lang}/{CHAPTERS[0]}/index.html"
    finally:
        context.close()


def test_copy_button_copies_a_command_without_its_prompt(browser, server):
    context = browser.new_context()
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    try:
        tab = context.new_page()
        hosts: list[str] = []
        tab.on("request", lambda r: hosts.append(urlparse(r.url).hostname))
        tab.goto(f"{server}/en/{CHAPTERS[0]}/index.html")
        tab.wait_for_load_state("networkidle")
        block = tab.locator("div.highlight-console").last
        block.hover()
        block.locator("button.copybtn").click()
        copied = tab.evaluate("navigator.clipboard.readText()")
        shown = block.locator("pre").inner_text().strip()
        assert shown.startswith("$ ") and copied.strip() == shown[2:]
        assert set(hosts) == {"127.0.0.1"}, hosts
    finally:
        context.close()


def _chinese_emphasis(site) -> str:
    for path in sorted((site / "zh_CN").glob("*/*.html")):
        if "api" not in path.parts and re.search(
            r"<em>[^<]*[\u4e00-\u9fff]", path.read_text(encoding="utf-8")
        ):
            return str(path.relative_to(site)).replace("\\", "/")
    raise AssertionError("no Chinese emphasis in the zh edition to check")


def test_chinese_emphasis_is_upright_not_fake_italics(page, server, site):
    page.page.goto(f"{server}/{_chinese_emphasis(site)}")
    em = page.page.locator("article em").filter(has_text=re.compile("[\u4e00-\u9fff]"))
    style = em.first.evaluate(
        "e => [getComputedStyle(e).fontStyle, getComputedStyle(e).textEmphasisStyle]"
    )
    assert style[0] == "normal" and "dot" in style[1], style
