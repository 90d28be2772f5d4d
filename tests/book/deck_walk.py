"""Walk every slide of a deck in Chromium and report what a lecturer would see.

Used by ``test_browser.py`` and, by hand, to look at a deck::

    python -m tests.book.deck_walk build/site slides/en/communication/index.html shots/

(which also saves a screenshot of every slide). For each slide (and each fragment
step of a step-by-step figure) it records the title, what is cut off or scrolls, the
speaker notes, and the displayed size of the smallest text of each figure.
"""

from __future__ import annotations

# Runs in the page: returns one record per slide.
WALK_JS = """async () => {
  Reveal.configure({transition: 'none', backgroundTransition: 'none',
                    fragments: true});
  const box = () => document.querySelector('.reveal .slides').getBoundingClientRect();
  const frame = () => new Promise(r => requestAnimationFrame(r));
  const out = [];
  const slides = Reveal.getSlides();
  for (let i = 0; i < slides.length; i++) {
    const s = slides[i];
    const idx = Reveal.getIndices(s); Reveal.slide(idx.h, idx.v, -1);
    await frame();
    const b = box();
    const cut = [];
    // Blocks only: a code line's spans or a formula's glyphs are inside them.
    const blocks = 'pre, code, table, img, figure, p, ul, ol, div, h1, h2, h3, '
      + 'mjx-container, mjx-container > svg';
    for (const el of s.querySelectorAll(blocks)) {
      if (el.closest('aside.notes')) continue;
      const r = el.getBoundingClientRect();
      if (r.height === 0 || r.width === 0) continue;
      const st = getComputedStyle(el);
      if (st.visibility === 'hidden' || st.display === 'none') continue;
      const out_ = r.right > b.right + 2 || r.bottom > b.bottom + 2
        || r.left < b.left - 2 || r.top < b.top - 2;
      const scrolls = (el.scrollHeight > el.clientHeight + 2
                       && ['auto', 'scroll', 'hidden'].includes(st.overflowY))
        || (el.scrollWidth > el.clientWidth + 2
            && ['auto', 'scroll', 'hidden'].includes(st.overflowX));
      if (out_ || scrolls)
        cut.push(el.tagName + (out_ ? ' outside ' : ' scrolls ') +
                 (typeof el.className === 'string' ? el.className : ''));
    }
    const scale = Reveal.getScale();
    const figures = [];
    for (const img of s.querySelectorAll('img')) {
      const m = Array.from(img.classList).find(c => c.startsWith('text-pt-'));
      if (!m || !img.naturalWidth) continue;
      const r = img.getBoundingClientRect();
      // object-fit: contain: the drawing is limited by the box's width or height
      const k = Math.min(r.width / img.naturalWidth,
                         r.height / img.naturalHeight) / scale;
      figures.push({src: img.getAttribute('src'),
                    fragment: img.classList.contains('fragment'),
                    min_text_px: parseFloat(m.slice(8)) * 96 / 72 * k,
                    drawn_w: img.naturalWidth * k, drawn_h: img.naturalHeight * k});
    }
    const notes = s.querySelector(':scope > aside.notes');
    out.push({
      index: i, h: idx.h, v: idx.v,
      title: ((s.querySelector('h1,h2,h3') || {}).textContent || '').trim(),
      cut: cut,
      notes_html: notes ? notes.innerHTML : '',
      notes_text: notes ? notes.textContent : '',
      fragments: s.querySelectorAll('.fragment').length,
      code: Array.from(s.querySelectorAll('pre code')).map(c => c.className),
      frames: s.querySelectorAll('.deck-frames img').length,
      figures: figures,
      text: (s.innerText || '').slice(0, 400),
    });
  }
  return out;
}"""


def _open(page, url: str) -> None:
    page.goto(url)
    page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
    page.wait_for_timeout(300)


def walk(page, url: str) -> list[dict]:
    """Open a deck and walk it; ``page`` is a Playwright page (1280x720)."""
    _open(page, url)
    return page.evaluate(WALK_JS)


def walk_many(browser, urls: list[str], pages: int = 2) -> dict[str, list[dict]]:
    """Walk several decks, ``pages`` at a time: ``{url: walk(page, url)}``.

    Each page renders in its own process, so on two cores two decks are walked at
    once: a walk is started without waiting for it, and the pages are waited on in
    the order their walks began.
    """
    start = (
        "() => { window.__walk = null;"
        f" ({WALK_JS})().then(r => {{ window.__walk = r; }}); }}"
    )
    opened = [
        browser.new_page(viewport={"width": 1280, "height": 720})
        for _ in range(max(1, min(pages, len(urls))))
    ]
    out: dict[str, list[dict]] = {}
    todo, running = list(urls), []
    try:
        while todo or running:
            while todo and len(running) < len(opened):
                page = next(p for p in opened if all(p is not q for q, _ in running))
                url = todo.pop(0)
                _open(page, url)
                page.evaluate(start)
                running.append((page, url))
            page, url = running.pop(0)
            page.wait_for_function("() => window.__walk !== null", timeout=600_000)
            out[url] = page.evaluate("() => window.__walk")
    finally:
        for page in opened:
            page.close()
    return out


def main() -> None:  # pragma: no cover - a tool for looking
    import argparse
    import functools
    import http.server
    import json
    import pathlib
    import shutil
    import threading

    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=pathlib.Path, help="the built site (build/site)")
    parser.add_argument("deck", help="a deck under the site, e.g. slides/en/models/")
    parser.add_argument("shots", type=pathlib.Path, help="folder for the screenshots")
    args = parser.parse_args()
    site, deck, shots = args.site, args.deck, args.shots
    if not (site / deck).is_file():
        parser.error(f"no deck at {site / deck} (build it: nox -s book)")
    if not shutil.which("chromium"):
        parser.error("no chromium on PATH (apt-get install chromium)")
    shots.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=site)
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/{deck}"
    chromium = shutil.which("chromium")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = b.new_page(viewport={"width": 1280, "height": 720})
        slides = walk(page, url)
        for s in slides:
            page.evaluate(f"Reveal.slide({s['h']}, {s['v']}, -1)")
            page.wait_for_timeout(80)
            page.screenshot(path=str(shots / f"{s['index']:03d}.png"))
        b.close()
    (shots / "slides.json").write_text(json.dumps(slides, indent=1, ensure_ascii=False))
    for s in slides:
        print(
            s["index"],
            s["title"][:50],
            "CUT" if s["cut"] else "",
            s["cut"][:3],
            "notes" if s["notes_text"].strip() else "NO-NOTES",
            [round(f["min_text_px"], 1) for f in s["figures"]],
        )


if __name__ == "__main__":  # pragma: no cover
    main()
