"""Each chapter's runnable example runs exactly as the book prints it.

The command is read from the chapter's ``index.rst`` (the ``console`` block of class
``runnable``), not copied into this test, and run in a shell whose ``PATH`` starts
with this interpreter's folder, as a reader's activated environment would.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from .conftest import CHAPTERS, DOCS, ROOT

BLOCK = re.compile(
    r"^\.\. code-block:: console\n   :class: runnable\n\n((?:   .*\n|\n)+)", re.M
)


def commands(chapter: str) -> list[str]:
    """The ``$ `` lines of the chapter's runnable block, without the prompt."""
    text = (DOCS / chapter / "index.rst").read_text(encoding="utf-8") + "\n"
    blocks = BLOCK.findall(text)
    assert len(blocks) == 1, f"{chapter}/index.rst: want one runnable console block"
    return [
        line.strip()[2:]
        for line in blocks[0].splitlines()
        if line.strip().startswith("$ ")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_chapters_example_runs_as_printed(chapter):
    lines = commands(chapter)
    assert lines, f"{chapter}: the runnable block has no '$ ' command"
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for line in lines:
        proc = subprocess.run(
            ["bash", "-c", line],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode == 0, f"$ {line}\n{proc.stdout}{proc.stderr}"
        assert len(proc.stdout.strip().splitlines()) >= 3, f"$ {line}: {proc.stdout}"
