"""Every GPU check of the book in one command, with the machine's own Python and torch.

    python3 tools/gpu.py run --out DIR [--wheels DIR] [--budget 450]
    python3 tools/gpu.py dry-run            # what run would do; imports checked here
    python3 tools/gpu.py wheels --dest .whl # the wheels a bare GPU machine lacks

A lent GPU machine is bare: its own Python with torch, Triton and transformers, and
no package registry, so ``nox -s gpu`` (a fresh venv from PyPI) cannot run there.
``run`` needs nothing installed: it puts ``reference/`` on ``PYTHONPATH``, installs
the wheels of ``--wheels`` (if any) into a folder of its own, then runs

1. every ``gpu``-marked test (only the test files that hold one are collected, so
   the book's Sphinx tests need not import), ``pytest -m gpu``, one JUnit file;
2. every GPU benchmark of :data:`aiinfra.results.GPU_RUNS`, each writing its stamped
   JSON into ``--out`` (``attention-cuda.json``, ``ddp-nccl.json``,
   ``roofline-cuda.json``), which ``docs/_data/bench/`` takes as they are;

each step with a time limit, within ``--budget`` seconds in all; what did not fit is
named in ``summary.json``. A failing step does not stop the others. The exit status
is 0 only if every step ran and passed.

Only the standard library is imported here; the steps run in child processes.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "reference"
TESTS = ROOT / "tests"
# What the gpu tests and benchmarks import beyond the standard library and torch.
# The lent machine has all of these (device/KINDS.md); a machine that lacks one
# gets it from --wheels (``wheels`` downloads them for Python 3.12).
NEEDS = ("pytest", "pytest_timeout", "numpy", "triton", "safetensors", "transformers")
WHEELS = (
    "pytest==9.2.0",
    "pluggy==1.7.0",
    "iniconfig==2.3.1",
    "packaging==26.4",
    "pytest-timeout==2.4.0",
)
OLDEST_TORCH = (2, 11)  # the lent machine's; the run refuses an older one


def gpu_test_files(tests: pathlib.Path = TESTS) -> list[pathlib.Path]:
    """The test files holding a ``gpu``-marked test or ``pytestmark``, sorted."""
    found = []
    for path in sorted(tests.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        marks = (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and n.attr == "gpu"
            and ast.unparse(n.value).endswith("mark")
        )
        if next(marks, None) is not None:
            found.append(path)
    return found


def benchmark_commands(out: pathlib.Path) -> list[tuple[str, list[str]]]:
    """``(name, argv)`` of each GPU benchmark, writing into ``out``.

    Asked from the package in a child process (it imports torch).
    """
    code = (
        "import json, os; from aiinfra import results; "
        "print(json.dumps([[f'{k}-{b}', results._kind(k, b).make_command(b, "
        "results.data_dir() / f'{k}-{b}.json')] for k, b in results.GPU_RUNS]))"
    )
    env = _env(out)
    text = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    runs = json.loads(text.strip().splitlines()[-1])

    def into_out(name: str, argv: list[str]) -> list[str]:
        """``--stamp`` (the results folder, here ``out``) as an explicit ``--out``."""
        where = ["--out", str(out / f"{name}.json")]
        return [w for a in argv for w in (where if a == "--stamp" else [a])]

    # ``aiinfra`` is the console script of an installed package; here it is
    # the module, with no install.
    return [
        (name, [sys.executable, "-m", "aiinfra.cli", *into_out(name, argv)[1:]])
        for name, argv in runs
    ]


def _env(out: pathlib.Path, site: pathlib.Path | None = None) -> dict[str, str]:
    paths = [str(REFERENCE), str(ROOT)] + ([str(site)] if site else [])
    old = os.environ.get("PYTHONPATH")
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(paths + ([old] if old else [])),
        AIINFRA_RESULTS_DIR=str(out),
        PYTHONUNBUFFERED="1",
        TORCH_EXTENSIONS_DIR=str(ROOT / ".torch_extensions"),
    )


def plan(out: pathlib.Path) -> list[tuple[str, list[str]]]:
    """Every step of ``run``, in order: the tests, then each benchmark."""
    junit = out / "gpu-tests.xml"
    files = [str(p.relative_to(ROOT)) for p in gpu_test_files()]
    tests = [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        "gpu",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=-ra",
        f"--junitxml={junit}",
        *files,
    ]
    return [("tests", tests), *benchmark_commands(out)]


def install_wheels(wheels: pathlib.Path, site: pathlib.Path) -> None:
    """Install every wheel of ``wheels`` into ``site`` (no index, no dependencies)."""
    found = sorted(wheels.glob("*.whl"))
    if not found:
        raise SystemExit(f"--wheels {wheels}: no .whl file there")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--target",
            str(site),
            *map(str, found),
        ],
        check=True,
    )


def missing_modules(env: dict[str, str]) -> list[str]:
    """The modules of :data:`NEEDS` (and torch) that this Python cannot import."""
    code = (
        "import importlib.util, sys; "
        f"print(' '.join(m for m in {('torch', *NEEDS)!r} "
        "if importlib.util.find_spec(m) is None))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


def torch_version(env: dict[str, str]) -> tuple[str, bool]:
    """This Python's torch version and whether CUDA is available to it."""
    code = "import torch; print(torch.__version__, torch.cuda.is_available())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return out[0], out[1] == "True"


def _at_least(version: str, oldest: tuple[int, int]) -> bool:
    parts = version.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= oldest


def run(out: pathlib.Path, wheels: pathlib.Path | None, budget: float) -> int:
    """Run every step of :func:`plan` within ``budget`` seconds; write the summary."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    site = None
    if wheels is not None:
        site = out.parent / f".{out.name}-site"
        install_wheels(wheels, site)
    env = _env(out, site)
    missing = missing_modules(env)
    if missing:
        raise SystemExit(
            f"this Python lacks {', '.join(missing)}: carry them as wheels "
            f"(python3 tools/gpu.py wheels --dest .whl) and pass --wheels .whl"
        )
    version, cuda = torch_version(env)
    if not _at_least(version, OLDEST_TORCH):
        raise SystemExit(f"torch {version} is older than {OLDEST_TORCH}: unsupported")
    if not cuda:
        raise SystemExit("torch sees no CUDA GPU here: nothing to run")
    steps = []
    for name, argv in plan(out):
        left = budget - (time.monotonic() - started)
        if left < 20:
            steps.append({"step": name, "status": "not run: budget spent"})
            continue
        t0 = time.monotonic()
        print(f"== {name} ({left:.0f} s left): {' '.join(argv[1:])}", flush=True)
        try:
            proc = subprocess.run(argv, env=env, cwd=ROOT, timeout=left, check=False)
            status = "passed" if proc.returncode == 0 else f"exit {proc.returncode}"
        except subprocess.TimeoutExpired:
            status = "timed out"
        steps.append(
            {"step": name, "status": status, "seconds": round(time.monotonic() - t0, 1)}
        )
        print(f"== {name}: {status}", flush=True)
    summary = {
        "torch": version,
        "seconds": round(time.monotonic() - started, 1),
        "steps": steps,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if all(s["status"] == "passed" for s in steps) else 1


def dry_run(out: pathlib.Path) -> int:
    """List every step and check, on this machine, that each collects and imports.

    The tests are collected (``--collect-only``) with this Python, so a test file
    that cannot import fails here, not on the GPU; each benchmark's command parses
    its flags (``--help``).
    """
    env = _env(out)
    print(
        f"torch here: {torch_version(env)[0]} (the run needs >= "
        f"{'.'.join(map(str, OLDEST_TORCH))} and a CUDA GPU)"
    )
    missing = missing_modules(env)
    print(f"modules the run imports that are missing here: {missing or 'none'}")
    failed = 0
    for name, argv in plan(out):
        print(f"{name}: {' '.join(argv[1:])}")
        check = argv + (["--collect-only"] if name == "tests" else ["--help"])
        proc = subprocess.run(check, env=env, cwd=ROOT, capture_output=True, text=True)
        if name == "tests":
            last = (proc.stdout.strip().splitlines() or ["?"])[-1]
            print(f"  collected: {last}")
        if proc.returncode:
            failed += 1
            tail = proc.stdout[-2000:] + proc.stderr[-2000:]
            print(f"  FAILED ({proc.returncode}):\n{tail}")
    return 1 if failed else 0


def download_wheels(dest: pathlib.Path) -> int:
    """Download :data:`WHEELS` for the GPU machine's Python 3.12 (pure Python)."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--platform",
        "any",
        "-d",
        str(dest),
        *WHEELS,
    ]
    return subprocess.run(cmd, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run every gpu test and GPU benchmark")
    r.add_argument(
        "--out",
        type=pathlib.Path,
        required=True,
        help="folder for the stamped results, JUnit file and summary",
    )
    r.add_argument("--wheels", type=pathlib.Path, help="folder of wheels to install")
    r.add_argument(
        "--budget",
        type=float,
        default=450.0,
        help="seconds for everything (default: %(default)s)",
    )
    d = sub.add_parser("dry-run", help="list the steps; collect and import them here")
    d.add_argument("--out", type=pathlib.Path, default=ROOT / "build" / "gpu")
    w = sub.add_parser("wheels", help="download the wheels a bare GPU machine lacks")
    w.add_argument("--dest", type=pathlib.Path, default=ROOT / ".whl")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        if args.budget <= 0:
            parser.error(f"--budget must be > 0 seconds, got {args.budget}")
        return run(args.out.resolve(), args.wheels, args.budget)
    if args.cmd == "dry-run":
        return dry_run(args.out.resolve())
    return download_wheels(args.dest)


if __name__ == "__main__":
    sys.exit(main())
