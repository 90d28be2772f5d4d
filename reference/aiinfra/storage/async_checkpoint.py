"""Asynchronous checkpointing: copy the state, write it while training goes on.

A synchronous save stalls every rank for the whole write, B / W seconds
(:func:`aiinfra.storage.sizes.write_seconds`), every k steps. An asynchronous save
(``torch.distributed.checkpoint.async_save``) stalls only to *stage* the state, a
copy into host memory, and hands the copy to a background thread that writes it
while the next steps run; the optimizer may then update the weights in place
without corrupting the checkpoint. The next save first waits for the previous one
(one write in flight), so writing must take less than k steps to stay hidden. The
background thread runs collectives (DCP gathers the ranks' plans), so it gets a
process group of its own: two threads issuing collectives on one group could pair
a training all-gather on one rank with a checkpoint gather on another. Here the
training loop times how long each mode keeps it from training.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import Tensor

from aiinfra.distributed import run_distributed
from aiinfra.storage.sharded import sharded_mlp, train_steps, training_state

MODES = ("none", "sync", "async")


@dataclass(frozen=True)
class CheckpointTiming:
    """Measured time of a training loop that checkpoints every ``every`` steps.

    Attributes:
        mode: ``"none"`` (no saves), ``"sync"`` or ``"async"``.
        steps: training steps run.
        saves: checkpoints written.
        seconds: wall time of the loop, the wait for the last async write included.
        blocked_seconds: of that, the time the loop spent in checkpoint calls
            (building the state dict, saving or staging, waiting for a write).
    """

    mode: str
    steps: int
    saves: int
    seconds: float
    blocked_seconds: float

    @property
    def step_seconds(self) -> float:
        """Mean wall time per step, checkpointing included."""
        return self.seconds / self.steps

    @property
    def overhead_per_step(self) -> float:
        """Mean time per step the loop was kept from training by checkpoints."""
        return self.blocked_seconds / self.steps


def train_with_checkpoints(
    root: str,
    widths: Sequence[int],
    batches: Sequence[tuple[Tensor, Tensor]],
    every: int,
    mode: str,
    group: dist.ProcessGroup | None = None,
    seed: int = 0,
) -> CheckpointTiming:
    """On every rank: train :func:`~aiinfra.storage.sharded.sharded_mlp`, saving.

    Step ``s`` (from 1) saves to ``root/step_<s>`` when ``s % every == 0``.

    Args:
        root: folder for the checkpoints.
        widths: layer widths of the MLP, input first.
        batches: one ``(x, y)`` per step, ``(B, D)`` and ``(B, O)``; B a multiple
            of the world size.
        every: k, steps between saves, >= 1.
        mode: one of :data:`MODES`.
        group: the process group of the checkpoint's collectives (a separate one
            for ``"async"``); ``None`` is the world.
        seed: seed of the initial weights.

    Returns:
        This rank's timing.
    """
    model, optimizer = sharded_mlp(widths, seed)
    pending: Future | None = None
    saves, blocked = 0, 0.0
    start = time.perf_counter()
    for step in range(1, len(batches) + 1):
        train_steps(model, optimizer, batches[step - 1 : step])
        if mode == "none" or step % every:
            continue
        t = time.perf_counter()
        # region save
        state = training_state(model, optimizer)
        path = Path(root) / f"step_{step}"
        if mode == "sync":
            dcp.save(state, checkpoint_id=path, process_group=group)
        else:
            if pending is not None:
                pending.result()  # one write in flight: wait for the previous one
            pending = dcp.async_save(state, checkpoint_id=path, process_group=group)
        # endregion
        blocked += time.perf_counter() - t
        saves += 1
    if pending is not None:
        t = time.perf_counter()
        pending.result()
        blocked += time.perf_counter() - t
    seconds = time.perf_counter() - start
    return CheckpointTiming(mode, len(batches), saves, seconds, blocked)


def compare_checkpointing(
    root: str,
    widths: Sequence[int],
    batches: Sequence[tuple[Tensor, Tensor]],
    every: int,
    seed: int = 0,
) -> dict[str, CheckpointTiming]:
    """On every rank: the same training without saves, with sync and async saves.

    Checkpoints go to ``root/sync`` and ``root/async``; the checkpoint collectives
    use a gloo group of their own.

    Returns:
        :data:`MODES` -> this rank's timing.
    """
    group = dist.new_group(backend="gloo")
    out = {}
    for mode in MODES:
        out[mode] = train_with_checkpoints(
            str(Path(root) / mode), widths, batches, every, mode, group, seed
        )
    dist.destroy_process_group(group)
    return out


def checkpoint_overhead(
    root: str,
    world_size: int,
    widths: Sequence[int],
    batches: Sequence[tuple[Tensor, Tensor]],
    every: int = 5,
    timeout: float = 120.0,
) -> dict[str, CheckpointTiming]:
    """Run :func:`compare_checkpointing` on ``world_size`` gloo ranks.

    Args:
        root: folder for the checkpoints.
        world_size: ranks, >= 1; must divide the batch.
        widths: layer widths of the MLP, input first.
        batches: one ``(x, y)`` per step (at least one), as
            :func:`aiinfra.parallel.toy.regression_batches` makes them.
        every: k, steps between saves, >= 1.
        timeout: seconds for the whole run.

    Returns:
        :data:`MODES` -> the timing of the slowest rank (it sets the job's pace).

    Raises:
        ValueError: ``world_size`` or ``every`` < 1, no batches, or ``world_size``
            does not divide the batch.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if not isinstance(every, int) or every < 1:
        raise ValueError(f"every must be an int >= 1, got {every!r}")
    if not batches:
        raise ValueError("batches must hold at least one (x, y)")
    if any(x.shape[0] % world_size for x, _ in batches):
        raise ValueError(f"world_size = {world_size} must divide every batch size")
    ranks = run_distributed(
        compare_checkpointing, world_size, root, widths, batches, every, timeout=timeout
    )
    return {m: max((r[m] for r in ranks), key=lambda t: t.seconds) for m in MODES}
