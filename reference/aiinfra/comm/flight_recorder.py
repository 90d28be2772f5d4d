"""A flight recorder of our own: which collective each rank entered last, and why.

A hang names no culprit: every rank still waiting reports a timeout, and the rank at
fault may be the one that says nothing. The evidence is what each rank was doing,
collective by collective, which PyTorch records in its *flight recorder* (a ring
buffer per process, ``TORCH_FR_BUFFER_SIZE`` entries, dumped on a timeout under NCCL).
:class:`FlightRecorder` is that idea in a few lines: before each collective a rank
appends its sequence number, op, shapes and the time to a file of its own, flushed at
once, so the file survives the rank dying; after it, the outcome. :func:`diagnose`
then reads all the files and names the culprit from the evidence alone: a rank that
left no exit line died; a rank that had not entered the collective the first failure
happened in was behind (stalled); ranks that entered the same collective with
different ops or shapes called a different collective, and the minority is at fault
(with two ranks there is no majority: both are named).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Entry:
    """One collective as a rank logged it.

    Args:
        seq: the rank's sequence number of the collective in its group, from 1.
        op: the collective's name, e.g. ``"all_reduce"``.
        shapes: the shape of each tensor argument.
        dtype: the dtype of the first tensor, e.g. ``"float32"``.
        start: wall-clock time the rank entered it, seconds since the epoch.
        end: when it returned or raised; ``None`` if the rank never came back.
        error: ``"<type>: <message>"`` if it raised, else ``None``.
    """

    seq: int
    op: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    start: float
    end: float | None = None
    error: str | None = None

    def fingerprint(self) -> tuple[str, tuple[tuple[int, ...], ...], str]:
        """What every rank must agree on: op, shapes and dtype."""
        return self.op, self.shapes, self.dtype


@dataclass(frozen=True)
class RankLog:
    """Everything one rank logged: its collectives and whether it exited cleanly."""

    rank: int
    entries: tuple[Entry, ...] = ()
    exited: bool = False


class FlightRecorder:
    """Log each collective of one rank to ``path`` (JSON lines), flushed line by line.

    Args:
        path: the rank's log file; its folder is created.
        rank: the rank that writes it.
    """

    def __init__(self, path: str | Path, rank: int) -> None:
        if not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be an int >= 0, got {rank!r}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rank = rank
        self.seq = 0
        self._file = self.path.open("w")

    def _write(self, **event: Any) -> None:
        # Flushed to the kernel at once: a rank that dies (os._exit, a crash)
        # has already written everything up to the collective it died in.
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()

    def call(self, op: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Log, then run ``fn(*args, **kwargs)``, then log its outcome.

        Args:
            op: the collective's name for the log.
            fn: the collective, e.g. ``dist.all_reduce``.
            *args: its arguments; the shapes of the tensors among them are logged.
            **kwargs: its keyword arguments (``group=``).

        Returns:
            What ``fn`` returned.
        """
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        shapes = [list(t.shape) for t in tensors]
        dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else ""
        # region record
        self.seq += 1
        seq, now = self.seq, time.time
        self._write(event="enter", seq=seq, op=op, shapes=shapes, dtype=dtype, t=now())
        try:
            out = fn(*args, **kwargs)
        except BaseException as e:  # a timeout, a closed connection, a mismatch
            self._write(event="error", seq=seq, t=now(), error=brief(e, 4000))
            raise
        self._write(event="done", seq=seq, t=now())
        # endregion
        return out

    def close(self) -> None:
        """Write the exit line (the rank did not die) and close the file."""
        self._write(event="exit", t=time.time())
        self._file.close()


def brief(e: BaseException, limit: int = 400) -> str:
    """``"<type>: <message>"``, first line only, at most ``limit`` characters."""
    text = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def read_log(path: str | Path, rank: int) -> RankLog:
    """Read one rank's log file (a missing file is a rank that logged nothing)."""
    path = Path(path)
    if not path.is_file():
        return RankLog(rank)
    entries: dict[int, dict[str, Any]] = {}
    exited = False
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "enter":
            entries[event["seq"]] = {
                "seq": event["seq"],
                "op": event["op"],
                "shapes": tuple(tuple(s) for s in event["shapes"]),
                "dtype": event["dtype"],
                "start": event["t"],
            }
        elif event["event"] in ("done", "error"):
            entries[event["seq"]]["end"] = event["t"]
            entries[event["seq"]]["error"] = event.get("error")
        elif event["event"] == "exit":
            exited = True
    return RankLog(rank, tuple(Entry(**e) for e in entries.values()), exited)


@dataclass(frozen=True)
class Diagnosis:
    """Who caused a hang and the evidence, in one line."""

    culprits: tuple[int, ...]
    line: str
    evidence: dict[str, Any] = field(default_factory=dict)


def _ranks(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {ranks}"


def diagnose(logs: list[RankLog]) -> Diagnosis:
    """Name the culprit of a failed run from the ranks' logs alone.

    Args:
        logs: one :class:`RankLog` per rank of the group, any order.

    Returns:
        The culprit ranks (empty if the logs show no fault) and a one-line reason.

    Raises:
        ValueError: ``logs`` is empty or names a rank twice.
    """
    ranks = sorted(log.rank for log in logs)
    if not logs or len(set(ranks)) != len(ranks):
        raise ValueError(f"logs must hold each rank once, got ranks {ranks}")
    by_rank = {log.rank: log for log in logs}
    failures = [e.end for log in logs for e in log.entries if e.error and e.end]
    if not failures and all(log.exited for log in logs):
        return Diagnosis((), "no rank failed")
    t_fail = min(failures, default=float("inf"))  # when the first rank failed
    # region diagnose
    dead = [r for r in ranks if not by_rank[r].exited]  # no exit line in its log
    entered = {  # the last collective each rank had entered when the first failed
        r: max((e.seq for e in log.entries if e.start <= t_fail), default=0)
        for r, log in by_rank.items()
    }
    top = max(entered.values())
    behind = [r for r in ranks if entered[r] < top]
    calls = {r: e for r in ranks for e in by_rank[r].entries if e.seq == top}
    counts = Counter(e.fingerprint() for e in calls.values())
    (common, n), *rest = counts.most_common() or [(None, 0)]
    tie = bool(rest) and rest[0][1] == n  # no majority: every rank is a suspect
    odd = [r for r, e in calls.items() if tie or e.fingerprint() != common]
    culprits = dead or behind or odd
    # endregion
    said = ", ".join(
        f"rank {r} {e.op}{[list(s) for s in e.shapes]}" for r, e in calls.items()
    )
    if dead:
        last = max(
            by_rank[r].entries[-1].seq if by_rank[r].entries else 0 for r in dead
        )
        line = (
            f"{_ranks(dead)} died after entering collective #{last} (no exit in its "
            "log); the others failed waiting for it"
        )
    elif behind:
        line = (
            f"{_ranks(behind)} had not entered collective #{top} when the first "
            "rank failed in it: stalled"
        )
    elif odd:
        line = f"collective #{top} differs across ranks ({said}): " + (
            "no majority, all suspect" if tie else f"{_ranks(odd)} called another"
        )
    else:
        line = f"all ranks entered collective #{top} alike ({said})"
    return Diagnosis(tuple(culprits), line, {"entered": entered})
