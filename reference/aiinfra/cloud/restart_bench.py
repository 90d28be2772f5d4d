"""``aiinfra bench restart``: kill a worker, watch torchrun restart and resume.

Two runs of :mod:`aiinfra.cloud.train` under ``torchrun --standalone`` on this
machine, gloo workers: one in which rank ``fail_rank`` dies before step
``fail_at``, and a control that never fails. The result holds every worker's
progress record per attempt (the step it resumed from, where it ended, a checksum of
its weights), the lines in which torchrun's agent reports the failure and the
restart, and the wall time of each run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aiinfra.cloud.job import RESTART_ENV
from aiinfra.cloud.train import PROGRESS

# What the agent prints when a worker dies and when it restarts the group.
_AGENT = re.compile(r"failed \(exitcode|Stopping worker group|[Rr]estart|SIGTERM")


@dataclass(frozen=True)
class RestartBenchConfig:
    """The demonstration: ``ranks`` workers train ``steps`` steps.

    Attributes:
        ranks: workers (torchrun ``--nproc-per-node``), >= 2.
        steps: steps of the run, >= 2.
        every: checkpoint every ``every`` steps, in 1..steps - 1.
        fail_at: the step before which ``fail_rank`` dies, after the first
            checkpoint: in every + 1..steps.
        fail_rank: the worker that dies, in 0..ranks - 1.
        timeout: seconds one torchrun run may take before it counts as hung.
    """

    ranks: int = 2
    steps: int = 8
    every: int = 2
    fail_at: int = 5
    fail_rank: int = 1
    timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.ranks < 2 or self.steps < 2:
            raise ValueError(
                f"ranks and steps must be >= 2, got {self.ranks}, {self.steps}"
            )
        if not 1 <= self.every < self.steps:
            raise ValueError(f"every must be in 1..{self.steps - 1}, got {self.every}")
        if not self.every < self.fail_at <= self.steps:
            raise ValueError(
                f"fail_at must be in {self.every + 1}..{self.steps} (after the first "
                f"checkpoint), got {self.fail_at}"
            )
        if not 0 <= self.fail_rank < self.ranks:
            raise ValueError(
                f"fail_rank must be in 0..{self.ranks - 1}, got {self.fail_rank}"
            )
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {self.timeout}")


def _torchrun(cfg: RestartBenchConfig, root: Path, fail: bool) -> dict[str, Any]:
    """One torchrun run of the entry point; its records, agent lines and time."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc-per-node", str(cfg.ranks), "--max-restarts", "1"]
    cmd += ["--monitor-interval", "0.5", "-m", "aiinfra.cloud.train"]
    cmd += ["--steps", str(cfg.steps), "--every", str(cfg.every)]
    cmd += ["--ckpt-dir", str(root / "ckpt")]
    if fail:
        cmd += ["--fail-at-step", str(cfg.fail_at), "--fail-rank", str(cfg.fail_rank)]
    (root / "tmp").mkdir(parents=True)
    env = {**os.environ, RESTART_ENV: "1", "OMP_NUM_THREADS": "1"}
    env["TMPDIR"] = str(root / "tmp")
    start = time.perf_counter()
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=cfg.timeout, env=env
    )
    seconds = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"torchrun exited {out.returncode}:\n{out.stderr[-2000:]}")
    records = [
        json.loads(p.read_text())
        for p in sorted((root / "ckpt" / PROGRESS).glob("attempt*_rank*.json"))
    ]
    # Without the log prefix (time, source file) and this machine's Python path.
    lines = [ln.split("] ", 1)[-1] for ln in out.stderr.splitlines()]
    lines = [re.sub(r" of binary: \S+", "", ln) for ln in lines]
    return {
        "seconds": seconds,
        "records": sorted(records, key=lambda r: (r["attempt"], r["rank"])),
        "agent_lines": [ln for ln in lines if _AGENT.search(ln)],
    }


def run_bench(cfg: RestartBenchConfig) -> dict[str, Any]:
    """Both runs, in a temporary folder; the result :mod:`aiinfra.results` stamps.

    Raises:
        RuntimeError: a run failed (torchrun's exit status and its last output).
        subprocess.TimeoutExpired: a run took longer than ``cfg.timeout``.
    """
    with tempfile.TemporaryDirectory(prefix="aiinfra-restart-") as tmp:
        restarted = _torchrun(cfg, Path(tmp) / "restarted", fail=True)
        control = _torchrun(cfg, Path(tmp) / "control", fail=False)
    finals = [r for r in restarted["records"] if r["final_step"] == cfg.steps]
    reference = [r["checksum"] for r in control["records"]]
    return {
        "config": asdict(cfg),
        "restarted": restarted,
        "control": control,
        "same_weights": bool(finals)
        and all(r["checksum"] == reference[0] for r in finals + control["records"]),
    }
