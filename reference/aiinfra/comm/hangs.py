"""Hangs you can reproduce on a laptop: a mismatched collective, a stall, a dead rank.

A collective completes only when every rank of the group calls it with the same op
and sizes. When one rank does something else, the others wait until the process
group's ``timeout`` (10 minutes by default for NCCL in PyTorch) and then fail with a
message that names no culprit. Each scenario here runs on spawned gloo ranks with a
timeout of a second or two: a first all-reduce that every rank agrees on, then the
fault, on the last rank (the *culprit*):

- ``mismatch``: the culprit calls ``broadcast`` where the others call ``all_reduce``;
- ``mismatch_detail``: the same under ``TORCH_DISTRIBUTED_DEBUG=DETAIL``, which wraps
  the group and compares every collective's fingerprint across ranks first;
- ``stall``: the culprit sleeps for twice the timeout before its all-reduce;
- ``die``: the culprit exits (``os._exit``) before it.

Every rank logs its collectives with :class:`~aiinfra.comm.flight_recorder.
FlightRecorder` and, at the end, dumps PyTorch's own flight recorder, which torch
2.13 keeps for gloo too (``TORCH_FR_BUFFER_SIZE`` set before the ranks start;
``torch._C._distributed_c10d._dump_fr_trace_json``). Under gloo its entries stay in
the state ``scheduled`` (no start or completion times) and it is dumped only on
request, not on a timeout as under NCCL (``TORCH_NCCL_DUMP_ON_TIMEOUT``); a rank that
died dumps nothing, so the diagnosis reads our own logs, which survive it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from aiinfra.comm.flight_recorder import FlightRecorder, brief, diagnose, read_log
from aiinfra.distributed import run_distributed

SCENARIOS = ("mismatch", "mismatch_detail", "stall", "die")
FR_BUFFER_SIZE = 64  # entries of torch's flight recorder per process
# PyTorch's default timeout of an NCCL process group: kProcessGroupNCCLDefaultTimeout
# in torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp (torch 2.13), 10 minutes.
TORCH_NCCL_DEFAULT_TIMEOUT_S = 10 * 60
# One gloo group of each spawn runs these scenarios in turn; "die" ends its ranks.
_SPAWNS = (("mismatch", "mismatch_detail", "stall"), ("die",))


@dataclass(frozen=True)
class HangRecord:
    """What one scenario did on every rank, and the diagnosis.

    Args:
        scenario: one of :data:`SCENARIOS`.
        world_size: ranks.
        timeout_s: the process group's timeout, seconds.
        errors: per rank, ``"<type>: <message>"`` of what the faulty collective
            raised (trimmed), or ``None`` (it returned, or the rank died first).
        elapsed_s: per rank, seconds from entering the faulty collective to its
            error; ``None`` where the rank never entered it or never came back.
        timeline: per rank, ``[seq, op, start_s, end_s, failed]`` for each
            collective, times from the first rank's first collective.
        launcher: what :func:`~aiinfra.distributed.run_distributed` raised, if
            anything (the launcher's view, like torchrun's).
        culprits: the ranks :func:`~aiinfra.comm.flight_recorder.diagnose` names.
        diagnosis: its one-line reason.
        torch_fr: per rank, the last entry of torch's flight recorder for the
            group (``seq``, ``op``, ``sizes``, ``state``, ``created``: when the rank
            entered it, seconds since the epoch) and its last enqueued and
            completed sequence numbers; ``None`` where the rank dumped nothing.
    """

    scenario: str
    world_size: int
    timeout_s: float
    errors: list[str | None]
    elapsed_s: list[float | None]
    timeline: list[list[list[Any]]]
    launcher: str | None
    culprits: list[int]
    diagnosis: str
    torch_fr: list[dict[str, Any] | None]


def _torch_fr(group: dist.ProcessGroup) -> dict[str, Any] | None:
    """The last entry of torch's flight recorder for ``group``, or ``None``.

    Under DETAIL, torch 2.13 records the wrapped group's collectives with an empty
    group name, among the wrapper's own all-gathers: none match, and it is ``None``.
    """
    dump = getattr(torch._C._distributed_c10d, "_dump_fr_trace_json", None)
    if dump is None:  # a torch without the flight recorder binding
        return None
    trace = json.loads(dump(True, False))  # (collectives, all entries, not only active)
    mine = [e for e in trace["entries"] if e["process_group"][0] == group.group_name]
    if not mine:
        return None
    e = mine[-1]
    status = trace["pg_status"].get(str(e["pg_id"]), {})
    return {
        "seq": e["collective_seq_id"],
        "op": e["profiling_name"],
        "sizes": e["input_sizes"],
        "state": e["state"],
        "created": e["time_created_ns"] / 1e9,  # seconds since the epoch
        "last_enqueued": int(status.get("last_enqueued_collective", -1)),
        "last_completed": int(status.get("last_completed_collective", -1)),
    }


def _one_scenario(scenario: str, folder: Path, timeout: float) -> None:
    """Rank side of one scenario; the evidence goes to ``folder``."""
    rank, culprit = dist.get_rank(), dist.get_world_size() - 1
    if scenario == "mismatch_detail":  # what TORCH_DISTRIBUTED_DEBUG=DETAIL sets
        dist.set_debug_level(dist.DebugLevel.DETAIL)
    group = dist.new_group(timeout=timedelta(seconds=timeout))
    dist.set_debug_level(dist.DebugLevel.OFF)  # only this group is wrapped
    rec = FlightRecorder(folder / scenario / f"rank{rank}.jsonl", rank)
    x = torch.ones(4)
    rec.call("all_reduce", dist.all_reduce, x, group=group)  # #1: all agree
    # region faults
    try:
        if rank == culprit and scenario == "stall":
            time.sleep(2 * timeout)  # a slow data loader, a hung GPU, a debugger
        if rank == culprit and scenario == "die":
            os._exit(1)  # killed by the OOM killer, a segfault, a lost node
        if rank == culprit and scenario.startswith("mismatch"):
            rec.call("broadcast", dist.broadcast, x, 0, group=group)
        else:
            rec.call("all_reduce", dist.all_reduce, x, group=group)
    except RuntimeError:
        pass  # the log holds the error; the next scenario still runs
    # endregion
    fr = _torch_fr(group)
    (folder / scenario / f"torch_fr{rank}.json").write_text(json.dumps(fr))
    rec.close()


def hang_rank(scenarios: tuple[str, ...], folder: str, timeout: float) -> None:
    """Run ``scenarios`` in turn on this rank (a function for ``run_distributed``)."""
    for scenario in scenarios:
        _one_scenario(scenario, Path(folder), timeout)


@contextlib.contextmanager
def _environ(**env: str) -> Iterator[None]:
    """Set environment variables for the ranks started inside, then restore them."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def shorten(message: str, limit: int = 400) -> str:
    """Drop the build path and gloo's tensor options from a torch error message.

    Args:
        message: the error as logged.
        limit: the most characters kept.
    """
    message = re.sub(r"\[/\S*?/(third_party/\S+?)\]", r"[\1]", message)
    options = r", TensorDeviceTypes=TensorOptions\((?:[^()]|\([^()]*\))*\)"
    message = re.sub(options, "", message)
    return message if len(message) <= limit else message[: limit - 1] + "…"


_DETAIL = re.compile(
    r"Rank (\d+) is running collective: CollectiveFingerPrint\(SequenceNumber=\d+, "
    r"OpType=(\w+)"
)


def detail_ops(errors: list[str | None]) -> dict[int, str]:
    """Each rank's op as ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` names it in the errors.

    Every rank's message names itself and one rank that disagrees, e.g. ``Rank 0
    is running collective: CollectiveFingerPrint(SequenceNumber=1,
    OpType=ALLREDUCE, ...), but Rank 1 is running collective: ...
    OpType=BROADCAST``; together they give every rank's op.

    Args:
        errors: the ranks' error messages (``None`` for a rank without one).

    Returns:
        Rank -> op type (``"ALLREDUCE"``, ``"BROADCAST"``), as torch spells it.
    """
    return {int(rank): op for e in errors if e for rank, op in _DETAIL.findall(e)}


def _record(
    scenario: str, folder: Path, ws: int, timeout: float, launcher: str | None
) -> HangRecord:
    logs = [read_log(folder / scenario / f"rank{r}.jsonl", r) for r in range(ws)]
    t0 = min(e.start for log in logs for e in log.entries)
    errors, elapsed, timeline, fr = [], [], [], []
    for log in logs:
        faulty = next((e for e in log.entries if e.seq == 2), None)
        failed = faulty is not None and faulty.error is not None
        errors.append(shorten(faulty.error) if failed else None)
        done = faulty is not None and faulty.end is not None
        elapsed.append(round(faulty.end - faulty.start, 3) if done else None)
        timeline.append(
            [
                [e.seq, e.op, round(e.start - t0, 3)]
                + [round(e.end - t0, 3) if e.end else None, e.error is not None]
                for e in log.entries
            ]
        )
        path = folder / scenario / f"torch_fr{log.rank}.json"
        fr.append(json.loads(path.read_text()) if path.is_file() else None)
    d = diagnose(logs)
    return HangRecord(
        scenario=scenario,
        world_size=ws,
        timeout_s=timeout,
        errors=errors,
        elapsed_s=elapsed,
        timeline=timeline,
        launcher=launcher,
        culprits=list(d.culprits),
        diagnosis=d.line,
        torch_fr=fr,
    )


def run_hangs(
    scenarios: tuple[str, ...] = SCENARIOS,
    world_size: int = 2,
    timeout: float = 2.0,
    folder: str | Path | None = None,
) -> list[HangRecord]:
    """Run the hang scenarios on spawned gloo ranks and diagnose each.

    Args:
        scenarios: some of :data:`SCENARIOS`, run in that order.
        world_size: ranks, at least 2; the last one is the culprit.
        timeout: the process group's timeout in seconds, in (0, 60].
        folder: where the ranks write their logs; default a temporary folder.

    Returns:
        One :class:`HangRecord` per scenario, in the order of :data:`SCENARIOS`.

    Raises:
        ValueError: an unknown or repeated scenario, ``world_size`` < 2, or a
            ``timeout`` out of range.
    """
    if not scenarios or set(scenarios) - set(SCENARIOS):
        raise ValueError(f"scenarios must be some of {SCENARIOS}, got {scenarios!r}")
    if len(set(scenarios)) != len(scenarios):
        raise ValueError(f"scenarios must not repeat, got {scenarios!r}")
    if not isinstance(world_size, int) or world_size < 2:
        raise ValueError(f"world_size must be an int >= 2, got {world_size!r}")
    if not 0 < timeout <= 60:
        raise ValueError(f"timeout must be in (0, 60] seconds, got {timeout!r}")
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory())
        folder = Path(folder)
        records = []
        for spawn in _SPAWNS:
            todo = tuple(s for s in spawn if s in scenarios)
            if not todo:
                continue
            launcher = None
            with _environ(TORCH_FR_BUFFER_SIZE=str(FR_BUFFER_SIZE)):
                try:
                    run_distributed(
                        hang_rank,
                        world_size,
                        todo,
                        str(folder),
                        timeout,
                        timeout=10 + 4 * timeout * len(todo),
                    )
                except (RuntimeError, TimeoutError) as e:
                    launcher = brief(e)
            records += [_record(s, folder, world_size, timeout, launcher) for s in todo]
        return records


def records_json(records: list[HangRecord]) -> list[dict[str, Any]]:
    """The records as JSON-ready dicts (the ``rows`` of the ``hangs`` results)."""
    return [asdict(r) for r in records]
