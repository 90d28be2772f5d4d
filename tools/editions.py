"""The book to take along: deck PDFs, the book as PDF and EPUB, in every language.

    python tools/editions.py [--lang en zh_CN] [--out build/site] [--fresh]
        [--only decks book epub]

Run after the site's builds (``tools/book.py build`` calls it when it builds the
whole site; the notebooks come with the HTML build itself):

- **decks**: each chapter's deck printed by headless Chromium from its
  ``?print-pdf`` view, one page per step of each slide (reveal.js's print layout),
  into ``slides/<lang>/<chapter>/aiinfra-<chapter>-slides-<lang>.pdf``;
- **book**: the book as one HTML page (Sphinx's ``singlehtml`` builder, ``-t
  editions``: numbered figures and tables, a table of contents, no API reference)
  printed by Chromium to ``<lang>/downloads/aiinfra-<lang>.pdf`` (A4, page numbers,
  a chapter per new page, the PDF's outline from the headings);
- **epub**: Sphinx's ``epub`` builder (``-t editions``, maths as MathML; it reuses
  the single page's doctrees, so a language's book is read once) to
  ``<lang>/downloads/aiinfra-<lang>.epub``.

Then the values that only exist once every file is built (each download's size,
each deck's length) are filled into the site's pages (``aiinfra_book.editions``).

Incremental: the Sphinx builds keep their doctrees (``build/doctrees/<builder>-
<lang>``), and a PDF is printed again only when what it prints changed (its HTML and
the images it shows; ``build/editions/stamps.json``). Without Chromium (or
Playwright) the PDFs are skipped with a message; under CI (``CI=true``) that is an
error, since ``.ci/run`` installs Chromium.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import functools
import hashlib
import http.server
import importlib.util
import json
import os
import pathlib
import re
import shutil
import sys
import threading
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD = ROOT / "build"
WORK = BUILD / "editions"
EXT = DOCS / "_ext" / "aiinfra_book"
KINDS = ("decks", "book", "epub")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(
        f"_editions_{name}", EXT / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(EXT))
import chapters as book_chapters  # noqa: E402
import languages  # noqa: E402

names = _load("editions")  # file names and the fill of the site's pages
EDITIONS = languages.load(DOCS)
LANGS = tuple(languages.published(EDITIONS))
CHAPTERS = book_chapters.chapters(DOCS)


def chromium() -> tuple[str | None, str]:
    """Chromium's path and, when the PDFs cannot be printed here, why."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if importlib.util.find_spec("playwright") is None:
        return None, "Playwright is not installed (pip install -e '.[docs]')"
    if path is None:
        return None, "no chromium on PATH (apt-get install chromium fonts-wqy-microhei)"
    return path, ""


FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# ---------------------------------------------------------------- Sphinx builds


def sphinx_build(
    builder: str, lang: str, fresh: bool, threads: int | None = None
) -> tuple[int, str, float]:
    """One editions build (``singlehtml`` or ``epub``) into build/editions/;
    ``threads``: torch's threads in it (``languages.build_env``)."""
    out = WORK / f"{builder}-{lang}"
    # one doctree folder for both builders: the EPUB reads nothing again
    doctrees = BUILD / "doctrees" / f"editions-{lang}"
    args = [
        "-b",
        builder,
        "-d",
        str(doctrees),
        "-q",
        "-D",
        f"language={lang}",
        "-t",
        "editions",
        "-W",
        "--keep-going",
    ]
    if fresh:
        args += ["-E"]
    if builder == "epub":
        # Every page written again: it reads nothing (the singlehtml build just did),
        # and Sphinx would otherwise write only the pages whose source is newer than
        # their output, keeping a references page whose ids predate new citations.
        args += ["-a"]
    args += [str(DOCS), str(out)]
    return languages.run_build(args, lang, threads, ROOT)


def clean_svg(data: bytes) -> bytes:
    """A matplotlib SVG as EPUB 3 wants it: no DOCTYPE naming an external DTD, a
    ``d`` on every path, and each id once and without colons (a figure of repeated
    images repeats their id; a figure's group ids may hold a colon)."""
    text = re.sub(rb"<!DOCTYPE[^>]*>\s*", b"", data, count=1)
    # the glyph of a space is a path without "d", which SVG requires
    text = re.sub(rb"<path(?=\s)(?![^>]*\sd=)", b'<path d="M 0 0"', text)
    return unique_ids(text, colons=True)


def unique_ids(text: bytes, colons: bool = False) -> bytes:
    """Each ``id`` once: a repeated one gets ``-2``, ``-3``... (``colons``: an
    SVG's ids lose their colons, which XML names may not hold)."""
    seen: dict[bytes, int] = {}

    def unique(m: re.Match) -> bytes:
        name = m[2].replace(b":", b"-") if colons else m[2]
        n = seen[name] = seen.get(name, 0) + 1
        return m[1] + b'id="' + name + (b"-" + str(n).encode() if n > 1 else b"") + b'"'

    return re.sub(rb'(\s)id="([^"]+)"', unique, text)


def finish_epub(lang: str, site: pathlib.Path) -> pathlib.Path:
    """The built EPUB copied into the site: its pages that hold MathML declared
    so in the package document (EPUB 3 asks for ``properties="mathml"``), its SVGs
    cleaned (:func:`clean_svg`)."""
    folder = WORK / f"epub-{lang}"
    built = next(folder.glob("*.epub"))
    target = site / names.book_epub(lang)
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(built) as src:
        items = {i.filename: src.read(i.filename) for i in src.infolist()}
    math = {
        name
        for name, data in items.items()
        if name.endswith(".xhtml") and re.search(rb"<math[\s>]", data)
    }
    for name in items:
        if name.endswith(".svg"):
            items[name] = clean_svg(items[name])
        elif name.endswith(".xhtml"):
            # a translated paragraph that cites a work twice repeats its span's id
            items[name] = unique_ids(items[name])
    opf_name = next(n for n in items if n.endswith(".opf"))
    opf = items[opf_name].decode("utf-8")

    def declare(m: re.Match) -> str:
        item = m[0]
        href = re.search(r'href="([^"]+)"', item)
        if not href or href[1] not in math:  # the OPF sits at the EPUB's root
            return item
        if "properties=" in item:
            return re.sub(r'properties="([^"]*)"', r'properties="\1 mathml"', item)
        return item.replace("<item ", '<item properties="mathml" ', 1)

    items[opf_name] = re.sub(r"<item [^>]*/>", declare, opf).encode("utf-8")
    tmp = target.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as out:
        # mimetype first and stored, as the EPUB container asks
        info = zipfile.ZipInfo("mimetype", (2026, 1, 1, 0, 0, 0))
        out.writestr(info, items.pop("mimetype"), zipfile.ZIP_STORED)
        for name, data in items.items():
            info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))
            out.writestr(info, data, zipfile.ZIP_DEFLATED)
    os.replace(tmp, target)
    return target


# ---------------------------------------------------------------- printing


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # noqa: D102
        pass


@contextlib.contextmanager
def serve(folder: pathlib.Path):
    """A static server of ``folder`` on an ephemeral port of 127.0.0.1."""
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def stamp(page: pathlib.Path) -> str:
    """What a printed page depends on: its HTML and every local file it loads."""
    h = hashlib.sha256(page.read_bytes())
    h.update((_CHAPTERS_FIRST + FOOTER).encode())  # how it is printed, too
    text = page.read_text(encoding="utf-8", errors="replace")
    for ref in sorted(set(re.findall(r'(?:src|href)="([^"#?:]+)[^"]*"', text))):
        path = (page.parent / ref).resolve()
        if path.is_file() and path.suffix in (".svg", ".png", ".css", ".js"):
            h.update(ref.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


_DECK_READY = "window.Reveal && Reveal.isReady()"
_BOOK_READY = (
    "!window.MathJax || (MathJax.startup && MathJax.startup.promise &&"
    " (MathJax.startup.promise.then(() => window.__typeset = true), window.__typeset))"
)
FOOTER = (
    '<div style="font-size:8px;width:100%;text-align:center;color:#666">'
    '<span class="pageNumber"></span> / <span class="totalPages"></span></div>'
)


def print_deck(browser, url: str, target: pathlib.Path) -> None:
    """A deck as PDF: reveal.js's print view, each fragment step a page."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(f"{url}?print-pdf", wait_until="load")
        page.wait_for_function(_DECK_READY, timeout=120_000)
        page.evaluate("document.fonts.ready")
        page.wait_for_timeout(300)
        pdf = page.pdf(
            width="1280px",
            height="720px",
            print_background=True,
            prefer_css_page_size=True,
            tagged=True,
        )
    finally:
        page.close()
    _write(target, pdf)


# The front page's toctrees hold the chapters two heading levels down (an h3 in the
# section "Run the code"): lift them after the front page's section, each heading in it
# raised as many levels, so that a chapter's title is an h1 and the PDF's outline
# (built from the headings) lists the chapters at its first level.
_CHAPTERS_FIRST = """() => {
  const front = document.querySelector('div.body > section');
  const wraps = [...front.querySelectorAll('.toctree-wrapper')].filter(
    (w) => !w.parentElement.closest('.toctree-wrapper'));
  let at = front;
  for (const wrap of wraps) {
    const first = wrap.querySelector('h1, h2, h3, h4, h5, h6');
    const shift = first ? Number(first.tagName[1]) - 1 : 0;
    at.after(wrap);
    at = wrap;
    const headings = wrap.querySelectorAll('h1, h2, h3, h4, h5, h6');
    for (const old of shift > 0 ? headings : []) {
      const heading = document.createElement('h' + (old.tagName[1] - shift));
      for (const a of old.attributes) heading.setAttribute(a.name, a.value);
      heading.innerHTML = old.innerHTML;
      old.replaceWith(heading);
    }
  }
  return wraps.length;
}"""


def print_book(browser, url: str, target: pathlib.Path) -> None:
    """The single-page book as an A4 PDF with page numbers and an outline whose
    first level is the chapters."""
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function(_BOOK_READY, timeout=300_000, polling=500)
        page.evaluate(_CHAPTERS_FIRST)
        page.evaluate("document.fonts.ready")
        page.emulate_media(media="print")
        pdf = page.pdf(
            format="A4",
            margin={"top": "16mm", "bottom": "18mm", "left": "16mm", "right": "16mm"},
            print_background=True,
            display_header_footer=True,
            header_template="<span></span>",
            footer_template=FOOTER,
            outline=True,
            tagged=True,
        )
    finally:
        page.close()
    _write(target, pdf)


def _write(target: pathlib.Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def print_all(jobs: list[tuple[str, pathlib.Path, pathlib.Path, pathlib.Path]]) -> int:
    """Print ``(kind, served folder, page, target)`` jobs whose input changed;
    returns how many were printed."""
    path, why = chromium()
    if path is None:
        if os.environ.get("CI") == "true":
            raise SystemExit(f"editions: cannot print the PDFs under CI: {why}")
        print(f"  editions: PDFs skipped: {why}")
        return 0
    stamps_file = WORK / "stamps.json"
    stamps = json.loads(stamps_file.read_text()) if stamps_file.exists() else {}
    todo = []
    for kind, folder, page, target in jobs:
        key = str(target.relative_to(ROOT))
        now = stamp(page)
        if target.exists() and stamps.get(key) == now:
            continue
        todo.append((kind, folder, page, target, key, now))
    if not todo:
        return 0
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=FLAGS)
        try:
            for folder in {j[1] for j in todo}:
                with serve(folder) as base:
                    for kind, f, page, target, key, now in todo:
                        if f != folder:
                            continue
                        t0 = time.perf_counter()
                        url = f"{base}/{page.relative_to(folder).as_posix()}"
                        (print_deck if kind == "deck" else print_book)(
                            browser, url, target
                        )
                        stamps[key] = now
                        stamps_file.parent.mkdir(parents=True, exist_ok=True)
                        stamps_file.write_text(json.dumps(stamps, indent=1))
                        print(
                            f"  {kind:8s} {time.perf_counter() - t0:6.1f} s -> "
                            f"{target.relative_to(ROOT)} "
                            f"({names.size_text(target.stat().st_size)})"
                        )
        finally:
            browser.close()
    return len(todo)


# ---------------------------------------------------------------- the site's pages


def deck_lengths(site: pathlib.Path, lang: str) -> dict[str, dict]:
    """``chapter -> {"slides", "minutes", "lectures"}`` written by the decks' build."""
    path = site / "slides" / lang / "decks.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def fill_site(site: pathlib.Path, langs: tuple[str, ...]) -> int:
    """Fill each ``aiinfra-fill`` span of the built pages: sizes of the downloads,
    the decks' lengths. Returns the number of pages changed."""
    sys.path.insert(0, str(DOCS / "_ext"))
    changed = 0
    for lang in langs:
        values: dict[str, str] = {}
        for f in (site / lang / names.DOWNLOADS).glob("*"):
            values[f"size:{f.relative_to(site).as_posix()}"] = names.size_text(
                f.stat().st_size
            )
        for chapter in CHAPTERS:
            pdf = site / names.deck_pdf(chapter, lang)
            if pdf.exists():
                values[f"size:{names.deck_pdf(chapter, lang)}"] = names.size_text(
                    pdf.stat().st_size
                )
        for chapter, info in deck_lengths(site, lang).items():
            values[f"deck:{chapter}"] = info["text"]
        for page in (site / lang).glob("*.html"):
            text = page.read_text(encoding="utf-8")
            if "aiinfra-fill" not in text:
                continue
            new = names.fill(text, values)
            if new != text:
                page.write_text(new, encoding="utf-8")
                changed += 1
    return changed


# ---------------------------------------------------------------- all of it


def build(
    site: pathlib.Path,
    langs: tuple[str, ...] = LANGS,
    kinds: tuple[str, ...] = KINDS,
    fresh: bool = False,
    jobs: int | None = None,
) -> dict[str, float]:
    """Build the editions of ``langs`` into ``site``; seconds per step.

    Raises:
        SystemExit: a Sphinx build failed, or (under CI) Chromium is missing.
    """
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    builders = [
        b for b, kind in (("singlehtml", "book"), ("epub", "epub")) if kind in kinds
    ]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(langs)))
    failed = []
    threads = (os.cpu_count() or 1) // jobs  # torch's threads per build: its cores

    def one_language(lang: str) -> list[tuple[str, int, str, float]]:
        # one after the other: they share the language's doctrees
        done = []
        for b in builders:
            first = fresh and b == builders[0]
            rc, log, seconds = sphinx_build(b, lang, first, threads)
            done.append((b, rc, log, seconds))
        return done

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(one_language, lg): lg for lg in langs}
        for future in concurrent.futures.as_completed(futures):
            lang = futures[future]
            for b, rc, log, seconds in future.result():
                times[f"{b}-{lang}"] = seconds
                print(
                    f"  {b:10s} {lang:6s} {seconds:6.1f} s -> build/editions/{b}-{lang}"
                )
                if log.strip():
                    print(log.rstrip())
                if rc:
                    failed.append(f"sphinx-build -b {b} ({lang}): exit code {rc}")
    if failed:
        raise SystemExit("; ".join(failed))
    for lang in langs:
        if "epub" in kinds:
            epub = finish_epub(lang, site)
            print(
                f"  epub     {lang:6s} -> {epub.relative_to(ROOT)} "
                f"({names.size_text(epub.stat().st_size)})"
            )
    prints = []
    for lang in langs:
        if "decks" in kinds:
            for chapter in CHAPTERS:
                page = site / "slides" / lang / chapter / "index.html"
                if page.exists():
                    prints.append(
                        ("deck", site, page, site / names.deck_pdf(chapter, lang))
                    )
        if "book" in kinds:
            folder = WORK / f"singlehtml-{lang}"
            prints.append(
                ("book", folder, folder / "index.html", site / names.book_pdf(lang))
            )
    t1 = time.perf_counter()
    printed = print_all(prints)
    times["print"] = time.perf_counter() - t1
    fill_site(site, langs)
    times["total"] = time.perf_counter() - t0
    done = f"{times['total']:.1f} s ({printed} PDFs printed)"
    print(f"editions of {', '.join(langs)} in {done}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lang", nargs="+", choices=list(EDITIONS), default=list(LANGS)
    )
    parser.add_argument("--out", type=pathlib.Path, default=BUILD / "site")
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--fresh", action="store_true", help="rebuild every page (-E)")
    parser.add_argument("--fill", action="store_true", help="only fill the pages")
    args = parser.parse_args(argv)
    if args.fill:
        fill_site(args.out, tuple(args.lang))
        return 0
    build(args.out, tuple(args.lang), tuple(args.only), args.fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
