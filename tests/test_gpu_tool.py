"""``tools/gpu.py``: the one command a bare GPU machine runs, checked here.

The GPU run itself needs a lent H200; what can be checked without one is that it
would run every ``gpu`` test and every GPU benchmark, that each collects and parses
here, and that it refuses a machine it cannot use with a message, before running
anything.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from aiinfra import results

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_tool", ROOT / "tools" / "gpu.py")
gpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu)


def test_the_run_collects_exactly_the_files_that_hold_a_gpu_test():
    # Ground truth: a plain text search for the marker.
    expected = sorted(
        p
        for p in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"pytest\.mark\.gpu\b", p.read_text(encoding="utf-8"))
    )
    assert gpu.gpu_test_files() == expected
    assert len(expected) >= 8


def test_every_gpu_benchmark_writes_into_the_folder_given(tmp_path):
    steps = gpu.plan(tmp_path)
    assert steps[0][0] == "tests"
    assert f"--junitxml={tmp_path / 'gpu-tests.xml'}" in steps[0][1]
    names = [name for name, _ in steps[1:]]
    assert names == [f"{k}-{b}" for k, b in results.GPU_RUNS]
    for (name, argv), (kind, backend) in zip(steps[1:], results.GPU_RUNS, strict=True):
        # The machine's own Python runs the package from the tree: no install.
        assert argv[:3] == [sys.executable, "-m", "aiinfra.cli"]
        assert argv[argv.index("--out") + 1] == str(tmp_path / f"{name}.json")
        assert argv[3:5] == list(results.KINDS[kind].command[1:3])
        assert backend in argv or "--device" in argv


def test_a_machine_without_cuda_is_refused_before_anything_runs(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the run would run")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu.py"), "run", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1 and "sees no CUDA GPU" in proc.stderr
    assert not (tmp_path / "summary.json").exists()


def test_bad_arguments_are_named():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gpu.py"),
            "run",
            "--out",
            "x",
            "--budget",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--budget must be > 0" in proc.stderr
    assert gpu._at_least("2.11.0+cu130", (2, 11))
    assert not gpu._at_least("2.10.1", (2, 11))


@pytest.mark.slow
def test_the_dry_run_collects_the_tests_and_parses_every_benchmark(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gpu.py"),
            "dry-run",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"collected: \d+/\d+ tests collected", proc.stdout)
    assert "FAILED" not in proc.stdout
