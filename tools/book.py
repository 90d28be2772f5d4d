"""Build, preview, serve and translate the book: the steps behind ``nox -s book``.

    python tools/book.py build [--lang en zh_CN] [--builder html revealjs] [--fresh]
        [--no-editions] [--deck-course TEXT] [--deck-lecturer TEXT] [--deck-date TEXT]
        (the course, its lecturer, date, chapters and minutes per lecture are set in
        slides/decks.toml; the --deck-* flags override its title-slide lines)
    python tools/book.py preview [--lang zh_CN] [--port 8000]   # live reload
    python tools/book.py serve [--port 8000] [--out DIR]
    python tools/book.py notebooks [--lang en zh_CN]   # the pages' notebooks and zips
    python tools/book.py editions [--lang ...] [--only decks book epub]  # PDFs, EPUBs
    python tools/book.py gettext           # docs -> build/gettext/*.pot
    python tools/book.py translate         # gettext + update catalogues + stat + todo
    python tools/book.py stats             # sphinx-intl stat: per-catalogue counts

The languages are the tables of ``docs/languages.toml``; a build without ``--lang``
builds the published ones. The site folder (``build/site`` by default) holds one
folder per language (``en/``, ``zh_CN/``: the book; its front page lists the chapters
and their decks), ``slides/<lang>/`` (one deck per chapter), and ``index.html``, which
sends a visitor to the front page in the browser's language.

The HTML build also writes each chapter page's Jupyter notebook beside it
(``<lang>/<chapter>/<page>.ipynb``) and their zips (``<lang>/downloads/``). A build
of the whole site (every builder, every published language) then makes the editions
(``tools/editions.py``: each deck as PDF, the book as PDF and EPUB), each only when
its input changed; ``--no-editions`` skips them, and so does a build narrowed with
``--lang`` or ``--builder`` (the authors' quick loop).

Builds are incremental: Sphinx reads again only the pages whose sources, catalogue
or computed inputs changed (``--fresh`` rebuilds everything, as CI does). Every build
runs with ``-W --keep-going``, one doctree folder per builder and language, and
without ``-j`` inside one ``sphinx-build`` (sphinx-revealjs is not parallel-safe):
the outputs build side by side in separate processes, as many as there are cores.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import html
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LOCALE = DOCS / "locale"
BUILDERS = ("html", "revealjs")


# docs/languages.toml and slides/decks.toml, read by the extension's own modules
# (standard library only).
sys.path.insert(0, str(DOCS / "_ext" / "aiinfra_book"))
import chapters as book_chapters  # noqa: E402
import decks  # noqa: E402
import languages  # noqa: E402

EDITIONS = languages.load(DOCS)
LANGS = tuple(languages.published(EDITIONS))  # built by default
SOURCE = languages.source(EDITIONS)


def prefix(code: str) -> str:
    """The ``browser`` prefix of a language, as a JavaScript string."""
    return json.dumps(EDITIONS[code].browser.lower())


def redirect(langs: tuple[str, ...] = LANGS) -> str:
    """The site's front door: the book's front page in the reader's language
    (the first language whose ``browser`` prefix matches, else the source)."""
    rules = "".join(
        f"if (prefs.some(l => l.toLowerCase().startsWith({prefix(c)})))"
        f' {{ location.replace("{c}/index.html"); }}\nelse '
        for c in langs
        if EDITIONS[c].browser
    )
    links = " · ".join(
        f'<a href="{c}/index.html">{html.escape(EDITIONS[c].name)}</a>' for c in langs
    )
    titles = " · ".join(html.escape(EDITIONS[c].title) for c in langs)
    return f"""<!DOCTYPE html>
<html lang="{SOURCE}"><head><meta charset="utf-8">
<title>{titles}</title>
<meta http-equiv="refresh" content="0; url={SOURCE}/index.html">
<script>
const prefs = navigator.languages || [navigator.language];
{rules}{{}}
</script></head>
<body>{links}
</body></html>
"""


def deck_options(course: str = "", lecturer: str = "", date: str = "") -> list[str]:
    """``-D`` settings of the decks' title slides (empty: not shown; the course
    defaults to the book's title).

    Raises:
        ValueError: a field holds a line break or another control character.
    """
    args = []
    for name, value in (("course", course), ("lecturer", lecturer), ("date", date)):
        if any(ord(c) < 32 for c in value):
            raise ValueError(f"--deck-{name} must be one line of text, got {value!r}")
        if value.strip():
            args += ["-D", f"aiinfra_deck_{name}={value.strip()}"]
    return args


def check_course() -> None:
    """Read the lecturers' ``slides/decks.toml`` before any build starts.

    Raises:
        ValueError: a bad entry, named (:func:`decks.load`).
    """
    names = book_chapters.chapters(DOCS)
    pages = {c: book_chapters.chapter_pages(DOCS, c) for c in names}
    decks.load(ROOT / decks.FILE, names, pages)


def sphinx_args(
    builder: str,
    lang: str,
    out: pathlib.Path,
    fresh: bool = False,
    strict: bool = True,
    deck: tuple[str, ...] = (),
) -> list[str]:
    """The ``sphinx-build`` arguments of one output (without the program)."""
    doctrees = ROOT / "build" / "doctrees" / f"{builder}-{lang}"
    args = ["-b", builder, "-d", str(doctrees), "-q", "-D", f"language={lang}"]
    if builder == "revealjs":
        args += ["-t", "slides", *deck]
    if builder == "gettext":
        args += ["-t", "gettext"]
    if fresh:
        args += ["-E"]
    if strict:
        args += ["-W", "--keep-going"]
    return [*args, str(DOCS), str(out)]


def sphinx(
    builder: str,
    lang: str,
    out: pathlib.Path,
    fresh: bool = False,
    strict: bool = True,
    deck: tuple[str, ...] = (),
    threads: int | None = None,
) -> tuple[int, str, float]:
    """Run one sphinx-build; return its exit code, its output and its seconds.

    ``threads``: torch's threads in it (``languages.build_env``; None: torch's choice).
    """
    args = sphinx_args(builder, lang, out, fresh, strict, deck)
    return languages.run_build(args, lang, threads, ROOT)


def site_path(out: pathlib.Path, builder: str, lang: str) -> pathlib.Path:
    return out / lang if builder == "html" else out / "slides" / lang


def build(
    out: pathlib.Path,
    langs: tuple[str, ...] = LANGS,
    builders: tuple[str, ...] = BUILDERS,
    fresh: bool = False,
    jobs: int | None = None,
    deck: tuple[str, ...] = (),
    editions: bool | None = None,
) -> dict[str, float]:
    """Build each builder in each language, side by side; return seconds per output.

    ``deck``: the title slides' fields (:func:`deck_options`). ``editions``: make
    the deck PDFs and the book's PDF and EPUB afterwards (``tools/editions.py``);
    by default when the whole site is built (every builder, every published
    language).

    Raises:
        SystemExit: a build failed (after every build has finished).
    """
    out.mkdir(parents=True, exist_ok=True)
    outputs = [(b, lang) for lang in langs for b in builders]
    # Longest first: the source language's book (autodoc, every computation), then
    # the decks, then the translations' books (no API pages: the shortest).
    outputs.sort(key=lambda o: (o[0] == "html" and o[1] != LANGS[0], o[0] != "html"))
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(outputs)))
    threads = (os.cpu_count() or 1) // jobs  # torch's threads per build: its cores
    t0 = time.perf_counter()
    times, failed = {}, []
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {
            pool.submit(
                sphinx, b, lang, site_path(out, b, lang), fresh, True, deck, threads
            ): (
                b,
                lang,
            )
            for b, lang in outputs
        }
        for future in concurrent.futures.as_completed(futures):
            b, lang = futures[future]
            rc, log, seconds = future.result()
            times[f"{b}-{lang}"] = seconds
            print(f"  {b:8s} {lang:6s} {seconds:6.1f} s -> {site_path(out, b, lang)}")
            if log.strip():
                print(log.rstrip())
            if rc:
                failed.append(f"sphinx-build -b {b} ({lang}): exit code {rc}")
    if failed:
        raise SystemExit("; ".join(failed))
    published = tuple(c for c in LANGS if (out / c / "index.html").exists())
    (out / "index.html").write_text(redirect(published or LANGS), encoding="utf-8")
    if editions is None:
        editions = set(langs) >= set(LANGS) and set(builders) >= set(BUILDERS)
    tool = _editions_tool()
    if editions:
        times.update(
            {f"editions-{k}": v for k, v in tool.build(out, langs, fresh=fresh).items()}
        )
    else:
        tool.fill_site(out, langs)  # the decks' lengths and the files' sizes known
    times["total"] = time.perf_counter() - t0
    print(f"built {out} in {times['total']:.1f} s ({jobs} processes)")
    return times


def _editions_tool():
    """``tools/editions.py``, loaded by its path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "editions_tool", ROOT / "tools" / "editions.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notebooks(out: pathlib.Path, langs: tuple[str, ...] = LANGS) -> list[pathlib.Path]:
    """Build the books of ``langs`` (HTML, incremental), which writes each page's
    notebook and the zips; return the zips."""
    build(out, langs, ("html",), editions=False)
    zips = sorted(p for lang in langs for p in (out / lang / "downloads").glob("*.zip"))
    for lang in langs:
        count = len(list((out / lang).glob("*/*.ipynb")))
        print(f"  {lang}: {count} notebooks in {out / lang}/<chapter>/<page>.ipynb")
    for z in zips:
        print(f"  {z.relative_to(out)}: {z.stat().st_size / 1e3:.0f} kB")
    return zips


def gettext(out: pathlib.Path = ROOT / "build" / "gettext") -> pathlib.Path:
    """Extract the book's messages (decks included) into ``.pot`` templates."""
    if out.exists():
        shutil.rmtree(out)
    # Not strict: the HTML builds report warnings; extraction should not fail on them.
    rc, log, _ = sphinx("gettext", "en", out, fresh=True, strict=False)
    if rc:
        raise SystemExit(f"gettext failed:\n{log}")
    return out


def translate() -> None:
    """gettext -> update the catalogues -> sphinx-intl stat -> what is left."""
    pot = gettext()
    # As sphinx-intl update, plus previous msgids and prefills (tools/catalogues.py).
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "catalogues.py"),
            "update",
            "--pot",
            str(pot),
        ],
        check=True,
        cwd=ROOT,
    )
    stats()
    # What is left, entry by entry: .po line, rst line, state, what to do.
    subprocess.run(
        [sys.executable, str(ROOT / "tools" / "catalogues.py"), "todo"],
        check=True,
        cwd=ROOT,
    )


def stats() -> None:
    """Translated, fuzzy and untranslated counts per catalogue: sphinx-intl stat."""
    # sphinx-intl stat exits 1 while anything is fuzzy or untranslated: that is
    # the translator's to-do list, not a failure of this command.
    for lang in languages.translations(EDITIONS):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "sphinx_intl",
                "stat",
                "-d",
                str(LOCALE),
                "-l",
                lang,
            ],
            check=False,
            cwd=ROOT,
        )


def preview_command(lang: str, port: int) -> list[str]:
    """sphinx-autobuild of one edition's book, reloading the browser on each edit."""
    out = site_path(ROOT / "build" / "site", "html", lang)  # shares the book build
    return [
        sys.executable,
        "-m",
        "sphinx_autobuild",
        *sphinx_args("html", lang, out, strict=False),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--watch",
        str(ROOT / "reference" / "aiinfra"),
        "--re-ignore",
        r"(_build|build|locale/.*\.mo$|api/(?!index)\w+\.rst$|__pycache__)",
    ]


def serve(out: pathlib.Path, port: int) -> None:
    """Serve the built site on 127.0.0.1 only."""
    if not (out / "index.html").exists():
        raise SystemExit(f"{out} has no index.html: build first (nox -s book)")
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(out)
    )
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as httpd:
        print(f"serving {out} at http://127.0.0.1:{port}/ (Ctrl-C stops)")
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass


def _port(text: str) -> int:
    port = int(text)
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"--port must be in 1..65535, got {port}")
    return port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the site (incremental)")
    every = list(EDITIONS)  # published or not: --lang builds a language being started
    b.add_argument("--lang", nargs="+", choices=every, default=list(LANGS))
    b.add_argument("--builder", nargs="+", choices=BUILDERS, default=list(BUILDERS))
    b.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    b.add_argument("--fresh", action="store_true", help="rebuild every page (-E)")
    b.add_argument("--jobs", type=int, default=None, help="processes (default: cores)")
    b.add_argument(
        "--no-editions",
        action="store_true",
        help="skip the deck PDFs and the book's PDF and EPUB",
    )
    b.add_argument("--deck-course", default="", help="course name on title slides")
    b.add_argument("--deck-lecturer", default="", help="lecturer on title slides")
    b.add_argument("--deck-date", default="", help="date on title slides")
    p = sub.add_parser("preview", help="live-reload preview of one edition")
    p.add_argument("--lang", choices=every, default=SOURCE)
    p.add_argument("--port", type=_port, default=8000)
    s = sub.add_parser("serve", help="serve the built site on 127.0.0.1")
    s.add_argument("--port", type=_port, default=8000)
    s.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    n = sub.add_parser("notebooks", help="each page's notebook and the zips")
    n.add_argument("--lang", nargs="+", choices=every, default=list(LANGS))
    n.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    e = sub.add_parser("editions", help="deck PDFs, the book as PDF and EPUB")
    e.add_argument("--lang", nargs="+", choices=every, default=list(LANGS))
    e.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    e.add_argument("--only", nargs="+", default=["decks", "book", "epub"])
    e.add_argument("--fresh", action="store_true")
    sub.add_parser("gettext", help="extract messages into build/gettext")
    sub.add_parser("translate", help="gettext, update catalogues, stat, what is left")
    sub.add_parser("stats", help="sphinx-intl stat of every translation's catalogues")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        if args.jobs is not None and args.jobs < 1:
            parser.error(f"--jobs must be at least 1, got {args.jobs}")
        try:
            deck = deck_options(args.deck_course, args.deck_lecturer, args.deck_date)
            check_course()
        except ValueError as exc:
            parser.error(str(exc))
        build(
            args.out,
            tuple(args.lang),
            tuple(args.builder),
            args.fresh,
            args.jobs,
            tuple(deck),
            editions=False if args.no_editions else None,
        )
    elif args.cmd == "notebooks":
        notebooks(args.out, tuple(args.lang))
    elif args.cmd == "editions":
        _editions_tool().build(args.out, tuple(args.lang), tuple(args.only), args.fresh)
    elif args.cmd == "preview":
        cmd = preview_command(args.lang, args.port)
        os.execvpe(cmd[0], cmd, languages.build_env(args.lang))
    elif args.cmd == "serve":
        serve(args.out, args.port)
    elif args.cmd == "gettext":
        gettext()
    elif args.cmd == "translate":
        translate()
    elif args.cmd == "stats":
        stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
