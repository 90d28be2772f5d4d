"""Execute every notebook of a built site with nbclient, as a reader runs them.

    python -m tests.book.run_notebooks build/site build/executed

One kernel of this environment per language (the two side by side), each notebook
run in it top to bottom after a ``%reset -f``: importing torch and the package once
per language instead of once per notebook. A cell tagged ``gpu`` or ``cluster`` is
replaced by a message that says why it is skipped (none is, today); the chapter's
example in a translation's notebook is skipped too, with a message: it is the same
command as in the source language's notebook, which runs it.

Writes each executed notebook under the output folder (``<lang>/<chapter>/<page>.
ipynb``, an error included as the cell's output) and ``summary.json``: per notebook
its seconds and its error, if any. ``tests/conftest.py`` runs this right after the
site's build, in the background, while the rest of the suite runs.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pathlib
import sys
import time

SKIP_TAGS = {"gpu": "needs a CUDA GPU", "cluster": "needs a cluster of nodes"}
CELL_TIMEOUT = 300  # seconds; the slowest cell (a chapter's example) takes ~10 s
SOURCE = "en"


def notebooks(site: pathlib.Path, lang: str) -> list[pathlib.Path]:
    """The notebooks of one language, in book order of folders and names."""
    return sorted(site.glob(f"{lang}/*/*.ipynb"))


def prepare(nb, lang: str):
    """The notebook as it is run here (module docstring)."""
    import nbformat

    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.get("metadata", {}).get("tags", []))
        for tag, why in SKIP_TAGS.items():
            if tag in tags:
                cell.source = f"print('skipped: this cell {why}')"
        if "example" in tags and lang != SOURCE:
            cell.source = (
                "print('skipped here: the same command runs in the English notebook')"
            )
    reset = nbformat.v4.new_code_cell("%reset -f")
    reset["id"] = "test-reset"
    nb.cells.insert(0, reset)
    return nb


def run_language(site: pathlib.Path, out: pathlib.Path, lang: str) -> dict:
    """Execute one language's notebooks in one kernel; their summary."""
    import nbclient
    import nbformat
    from jupyter_client.manager import KernelManager

    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env.pop("MPLBACKEND")  # the kernel's inline backend draws the figures
    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(site), env=env)
    summary = {}
    try:
        for path in notebooks(site, lang):
            nb = prepare(nbformat.read(path, as_version=4), lang)
            error = ""
            t0 = time.perf_counter()
            try:
                nbclient.NotebookClient(nb, km=km, timeout=CELL_TIMEOUT).execute()
            except Exception as exc:  # noqa: BLE001 - reported by the test
                error = f"{type(exc).__name__}: {exc}"[-3000:]
                if not km.is_alive():
                    km.restart_kernel(now=True)
            rel = path.relative_to(site).as_posix()
            summary[rel] = {"seconds": time.perf_counter() - t0, "error": error}
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
    finally:
        km.shutdown_kernel(now=True)
    return summary


def run(site: pathlib.Path, out: pathlib.Path, langs: list[str]) -> dict:
    """Execute every language's notebooks, side by side; write ``summary.json``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").unlink(missing_ok=True)  # no stale summary if this fails
    t0 = time.perf_counter()
    summary: dict = {}
    with concurrent.futures.ThreadPoolExecutor(len(langs)) as pool:
        for part in pool.map(lambda lg: run_language(site, out, lg), langs):
            summary.update(part)
    result = {"seconds": time.perf_counter() - t0, "notebooks": summary}
    (out / "summary.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


def main(argv: list[str]) -> int:
    site, out = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    langs = argv[2:] or sorted({p.parts[-3] for p in site.glob("*/*/*.ipynb")})
    result = run(site, out, langs)
    failed = [k for k, v in result["notebooks"].items() if v["error"]]
    print(
        f"{len(result['notebooks'])} notebooks executed in {result['seconds']:.0f} s"
        f" ({len(failed)} failed)"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
