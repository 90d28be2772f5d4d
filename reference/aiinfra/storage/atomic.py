"""Atomic commit: a checkpoint is either whole and named, or it does not exist.

A job can die in the middle of a save: a rank is preempted, a node fails, the
filesystem fills. If the save wrote into the folder that the job resumes from, the
restart finds half a checkpoint and either crashes or, worse, loads it. The cure
is the one databases use. Every rank writes into a temporary folder
(``.tmp-step_<n>``); a barrier waits until all of them have finished; only then
does rank 0 rename the folder to ``step_<n>`` (a rename within a filesystem is
atomic in POSIX) and replace the ``latest`` pointer, itself written to a temporary
file and renamed over the old one. A crash at any point leaves ``latest`` naming
the previous, complete checkpoint; a temporary folder is never reported as one.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter, StorageWriter

from aiinfra.storage.sharded import METADATA, check_checkpoint_dir

LATEST = "latest"  # the pointer file: the name of the newest committed checkpoint
_COMMITTED = re.compile(r"step_(\d{8})")


def step_dir(root: str | os.PathLike, step: int) -> Path:
    """Where step ``step``'s committed checkpoint lives: ``root/step_<8 digits>``."""
    return Path(root) / f"step_{step:08d}"


def _fsync_dir(path: Path) -> None:
    # A rename is durable only once the folder that holds the names is flushed.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _point_latest(root: Path, name: str) -> None:
    tmp = root / f".{LATEST}.tmp"
    with open(tmp, "w") as f:
        f.write(name + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / LATEST)  # atomic: readers see the old name or the new
    _fsync_dir(root)


def atomic_save(
    state_dict: dict[str, Any],
    root: str | os.PathLike,
    step: int,
    storage_writer: Callable[[Path], StorageWriter] = FileSystemWriter,
    group: dist.ProcessGroup | None = None,
) -> Path:
    """Save ``state_dict`` with DCP as step ``step`` under ``root``, all or nothing.

    Call on every rank of ``group`` with the same ``root`` and ``step``.

    Args:
        state_dict: this rank's state, e.g.
            :func:`~aiinfra.storage.sharded.training_state`.
        root: the folder of the run's checkpoints (created if missing).
        step: the training step, >= 0; names the checkpoint.
        storage_writer: builds DCP's writer for a folder (default
            ``FileSystemWriter``; e.g. ``functools.partial(FileSystemWriter,
            thread_count=4)``).
        group: the ranks that save; ``None`` is the world.

    Returns:
        The committed folder, :func:`step_dir`.

    Raises:
        ValueError: ``step`` is not an int >= 0.
        FileExistsError: step ``step`` is already committed.
    """
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    root, final = Path(root), step_dir(root, step)
    if final.exists():
        raise FileExistsError(f"step {step} is already committed at {str(final)!r}")
    tmp = root / f".tmp-{final.name}"
    if dist.get_rank(group) == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # left by a save that crashed
        tmp.mkdir()
    dist.barrier(group)  # the folder exists before anyone writes into it
    # region commit
    dcp.save(state_dict, storage_writer=storage_writer(tmp), process_group=group)
    dist.barrier(group)  # every rank has written all of its shards
    if dist.get_rank(group) == 0:
        os.rename(tmp, final)
        _fsync_dir(root)
        _point_latest(root, final.name)
    dist.barrier(group)  # no rank returns before the commit is visible
    # endregion
    return final


def committed_checkpoints(root: str | os.PathLike) -> list[Path]:
    """The committed checkpoints under ``root``, oldest first.

    Committed means renamed into place (``step_<n>``) with DCP's metadata inside;
    temporary folders of unfinished saves are never listed.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"root {str(root)!r} is not a folder")
    return sorted(
        p
        for p in root.iterdir()
        if _COMMITTED.fullmatch(p.name) and (p / METADATA).is_file()
    )


def latest_checkpoint(root: str | os.PathLike) -> Path | None:
    """The checkpoint the ``latest`` pointer names, or ``None`` before the first.

    Raises:
        FileNotFoundError: ``root`` is not a folder, or ``latest`` names a folder
            that holds no checkpoint.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"root {str(root)!r} is not a folder")
    pointer = root / LATEST
    if not pointer.is_file():
        return None
    return check_checkpoint_dir(root / pointer.read_text().strip())


def load_latest(
    state_dict: dict[str, Any],
    root: str | os.PathLike,
    group: dist.ProcessGroup | None = None,
) -> int:
    """Load the latest committed checkpoint under ``root`` into ``state_dict``.

    Args:
        state_dict: this rank's state of the right shapes, filled in place.
        root: the folder of the run's checkpoints.
        group: the ranks that load; ``None`` is the world.

    Returns:
        The step that was loaded.

    Raises:
        FileNotFoundError: ``root`` is missing or holds no committed checkpoint.
    """
    path = latest_checkpoint(root)
    if path is None:
        raise FileNotFoundError(f"root {str(root)!r} holds no committed checkpoint")
    dcp.load(state_dict, checkpoint_id=path, process_group=group)
    return int(_COMMITTED.fullmatch(path.name).group(1))
