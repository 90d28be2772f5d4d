"""Build, serve and translate the book: the steps behind ``nox -s book``.

    python tools/book.py build [--lang en zh_CN] [--builder html revealjs] [--out DIR]
    python tools/book.py serve [--port 8000] [--out DIR]
    python tools/book.py gettext           # docs -> build/gettext/*.pot
    python tools/book.py translate         # gettext + sphinx-intl update + statistics
    python tools/book.py stats             # the per-chapter translation table

The site folder (``build/site`` by default) holds ``index.html`` (a landing page),
``en/`` and ``zh_CN/`` (the book), and ``slides/en/``, ``slides/zh_CN/`` (the decks).
Every build runs with ``-W --keep-going`` and a fresh environment (``-E``), one
doctree folder per builder and language, and without ``-j`` (sphinx-revealjs is not
parallel-safe).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LOCALE = DOCS / "locale"
LANGS = ("en", "zh_CN")
BUILDERS = ("html", "revealjs")

LANDING = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AI Infrastructure · AI 基础设施</title>
<style>
body {{ font-family: system-ui, "Noto Sans CJK SC", "WenQuanYi Micro Hei", sans-serif;
       max-width: 44rem; margin: 4rem auto; padding: 0 1rem; line-height: 1.6; }}
a {{ color: #0b5cad; }} h1 {{ margin-bottom: .2rem; }} ul {{ padding-left: 1.2rem; }}
</style></head><body>
<h1>AI Infrastructure · AI 基础设施</h1>
<p>Train and serve large models on clusters, with code that runs.<br>
<span lang="zh-CN">在集群上训练和部署大模型，每段代码都能运行、都经过测试。</span></p>
<h2>Book · 书</h2>
<ul><li><a href="en/index.html">English</a></li>
<li><a href="zh_CN/index.html" lang="zh-CN">中文</a></li></ul>
<h2>Slides · 幻灯片</h2>
<ul>{decks}</ul>
<p><small>Built {stamp}.</small></p>
</body></html>
"""


def _env(lang: str) -> dict[str, str]:
    env = dict(
        os.environ,
        AIINFRA_LANG=lang,
        PYTHONHASHSEED="0",
        SOURCE_DATE_EPOCH=os.environ.get("SOURCE_DATE_EPOCH", "1764547200"),
    )
    env.setdefault("MPLBACKEND", "Agg")
    return env


def sphinx(
    builder: str,
    lang: str,
    out: pathlib.Path,
    tags: tuple[str, ...] = (),
    strict: bool = True,
) -> None:
    """Run one sphinx-build; raise ``SystemExit`` with its code on failure."""
    conf = ROOT / ("slides" if builder == "revealjs" else "docs")
    doctrees = ROOT / "build" / "doctrees" / f"{builder}-{lang}"
    cmd = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        builder,
        "-c",
        str(conf),
        "-E",
        "-d",
        str(doctrees),
        "-q",
        "-D",
        f"language={lang}",
    ]
    if strict:
        cmd += ["-W", "--keep-going"]
    for tag in tags:
        cmd += ["-t", tag]
    cmd += [str(DOCS), str(out)]
    t0 = time.perf_counter()
    rc = subprocess.run(cmd, env=_env(lang), cwd=ROOT).returncode
    print(f"  {builder:8s} {lang:6s} {time.perf_counter() - t0:6.1f} s -> {out}")
    if rc:
        raise SystemExit(
            f"sphinx-build -b {builder} ({lang}) failed with exit code {rc}"
        )


def decks() -> list[str]:
    """Chapters that have a deck (``docs/<chapter>/slides.rst``), in book order."""
    index = (DOCS / "index.rst").read_text(encoding="utf-8")
    found = [p.parent.name for p in DOCS.glob("*/slides.rst")]
    return sorted(found, key=lambda c: (index.find(f"{c}/index"), c))


def build(
    out: pathlib.Path,
    langs: tuple[str, ...] = LANGS,
    builders: tuple[str, ...] = BUILDERS,
) -> None:
    """Build the site: each builder in each language, plus the landing page."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for lang in langs:
        for builder in builders:
            dest = out / lang if builder == "html" else out / "slides" / lang
            sphinx(builder, lang, dest)
    titles = _deck_titles()
    items = "".join(
        f'<li>{titles.get(c, c)}: <a href="slides/en/{c}/slides.html">English</a> · '
        f'<a href="slides/zh_CN/{c}/slides.html" lang="zh-CN">中文</a></li>'
        for c in decks()
    )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (out / "index.html").write_text(
        LANDING.format(decks=items, stamp=stamp), encoding="utf-8"
    )
    print(f"built {out} in {time.perf_counter() - t0:.1f} s")


def _deck_titles() -> dict[str, str]:
    titles = {}
    for chapter in decks():
        lines = (DOCS / chapter / "index.rst").read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines[1:], 1):
            if line and set(line) <= set("=#*-") and lines[i - 1].strip():
                titles[chapter] = lines[i - 1].strip()
                break
    return titles


def gettext(out: pathlib.Path = ROOT / "build" / "gettext") -> pathlib.Path:
    """Extract the book's and the decks' messages into ``.pot`` templates."""
    if out.exists():
        shutil.rmtree(out)
    # Not strict: the HTML builds report warnings; extraction should not fail on them.
    sphinx("gettext", "en", out, tags=("gettext",), strict=False)
    # The API reference is generated from English docstrings and is not translated.
    for pot in out.glob("api*.pot"):
        pot.unlink()
    return out


def translate() -> None:
    """gettext -> sphinx-intl update -> statistics."""
    pot = gettext()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx_intl",
            "update",
            "-p",
            str(pot),
            "-l",
            "zh_CN",
            "-d",
            str(LOCALE),
            "-w",
            "88",
        ],
        check=True,
        cwd=ROOT,
    )
    stats()


def stats() -> int:
    """Print translated / fuzzy / untranslated counts per chapter catalogue."""
    from babel.messages.pofile import read_po

    rows, missing = [], 0
    for po in sorted((LOCALE / "zh_CN" / "LC_MESSAGES").glob("*.po")):
        with po.open("rb") as f:
            cat = read_po(f)
        msgs = [m for m in cat if m.id]
        fuzzy = sum(1 for m in msgs if m.fuzzy)
        untranslated = sum(1 for m in msgs if not m.fuzzy and not m.string)
        done = len(msgs) - fuzzy - untranslated
        missing += fuzzy + untranslated
        rows.append((po.stem, len(msgs), done, fuzzy, untranslated))
    print(
        f"{'catalogue':24s} {'messages':>8s} {'done':>6s} {'fuzzy':>6s} "
        f"{'missing':>8s} {'%':>6s}"
    )
    for name, total, done, fuzzy, untr in rows:
        pct = 100 * done / total if total else 100.0
        print(f"{name:24s} {total:8d} {done:6d} {fuzzy:6d} {untr:8d} {pct:6.1f}")
    return missing


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the site")
    b.add_argument("--lang", nargs="+", choices=LANGS, default=list(LANGS))
    b.add_argument("--builder", nargs="+", choices=BUILDERS, default=list(BUILDERS))
    b.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    s = sub.add_parser("serve", help="serve the built site on 127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "site")
    sub.add_parser("gettext", help="extract messages into build/gettext")
    sub.add_parser("translate", help="gettext, sphinx-intl update, statistics")
    sub.add_parser("stats", help="per-chapter translation statistics")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        build(args.out, tuple(args.lang), tuple(args.builder))
    elif args.cmd == "serve":
        if not 0 < args.port < 65536:
            parser.error(f"--port must be in 1..65535, got {args.port}")
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
