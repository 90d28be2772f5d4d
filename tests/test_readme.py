"""The README's ``aiinfra`` block, run as a newcomer runs it.

Each command of the block is run as printed (``aiinfra serve`` aside: it serves
until stopped, and its own tests start it), in a fresh process with an empty home
and working folder, and must: exit 0; leave the repository's files as they were
(``git status`` unchanged: no command writes the book's data unless asked);
say on stderr what it runs and show progress when it takes long (forced on with
``AIINFRA_PROGRESS=1``, as a terminal would show it). Every command that prints
tables is also run with ``--json`` and must print one valid JSON document. The
long measurements (tens of seconds to minutes on a CPU) are ``slow`` and run once,
as printed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from aiinfra import cli

ROOT = Path(__file__).resolve().parents[1]
SKIPPED = ("serve",)  # runs until stopped; tests/infer/engine covers it
# Tens of seconds or more on a shared CPU: the slow lane runs them as printed.
SLOW = ("bench engine", "bench storage", "bench restart", "bench moe")
SLOW += ("bench attention", "bench decode", "comm hangs")
PRINT_FILES = ("k8s render", "k8s monitoring")  # they print YAML, not tables


def readme_commands() -> list[str]:
    """The ``aiinfra ...`` lines of the README's command block, comments cut."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(aiinfra[ \n].*?)```", text, flags=re.DOTALL)
    assert block, "README.md has no block of aiinfra commands"
    return [line.split("  #")[0].strip() for line in block[1].splitlines() if line]


def words(command: str) -> str:
    """``bench moe`` of ``aiinfra bench moe --tokens 256``; ``aiinfra`` alone."""
    found = [w for w in shlex.split(command)[1:3] if not w.startswith("-")]
    return " ".join(found) or "aiinfra"


def _git_status() -> str | None:
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def run(command: str, tmp_path: Path, timeout: float) -> subprocess.CompletedProcess:
    """``command`` in a fresh interpreter, home and working folder in ``tmp_path``."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "reference"), str(ROOT)]),
        "AIINFRA_PROGRESS": "1",
    }
    env.pop("AIINFRA_RESULTS_DIR", None)  # the book's own data folder
    argv = [sys.executable, "-m", "aiinfra.cli", *shlex.split(command)[1:]]
    return subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


COMMANDS = [c for c in readme_commands() if words(c) not in SKIPPED]
LONG = {c.words for c in cli.commands() if c.runs}


def check(command: str, tmp_path: Path, timeout: float, json_too: bool = True) -> None:
    before = _git_status()
    done = run(command, tmp_path, timeout)
    assert done.returncode == 0, f"{command}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr
    if before is not None:
        assert _git_status() == before, f"{command} changed the repository"
    if words(command) in LONG:
        said = f"aiinfra {words(command)}: "
        assert said in done.stderr, f"{command} did not say what it runs"
        assert re.search(r"\d+/\d+|/~\d+ s", done.stderr), f"{command}: no progress"
    if words(command) in (*PRINT_FILES, "aiinfra") or not json_too:
        return
    json_run = run(f"{command} --json", tmp_path, timeout)
    assert json_run.returncode == 0, json_run.stderr[-3000:]
    doc = json.loads(json_run.stdout)
    assert doc["tables"] and doc["command"] == f"aiinfra {words(command)}"


def test_the_readme_lists_commands_that_exist():
    known = {c.words for c in cli.commands()}
    assert len(COMMANDS) >= 15
    assert {words(c) for c in COMMANDS} - {"aiinfra"} <= known


@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if words(c) not in SLOW], ids=words
)
def test_a_readme_command_runs_as_printed(command, tmp_path):
    check(command, tmp_path, timeout=180)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command", [c for c in COMMANDS if words(c) in SLOW], ids=words
)
def test_a_long_readme_command_runs_as_printed(command, tmp_path):
    # Once, as printed: their --json is the same document as the short ones'.
    check(command, tmp_path, timeout=600, json_too=False)
