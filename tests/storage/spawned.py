"""The rank side of the storage tests: four spawns shared by every test.

1. 4 ranks train the sharded MLP, save it with DCP, and run the sync/async
   comparison (:func:`save_run`).
2. 2 ranks commit step 1 atomically, then rank 1 dies halfway through step 2
   (:func:`crash_run`; the spawn fails by design).
3. 2 ranks load everything the first two wrote (:func:`load_run`).
4. 3 ranks load the sharded checkpoint through :func:`aiinfra.storage.reshard`.

Ground truth (:func:`reference_state`) is one process training an unsharded copy
of the model with ``torch.optim.Adam`` on the whole batch.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from aiinfra.parallel.toy import mlp, regression_batches
from aiinfra.storage import (
    atomic_save,
    compare_checkpointing,
    full_tensors,
    load_latest,
    load_sharded,
    save_sharded,
    sharded_mlp,
    train_steps,
    training_state,
)
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.state_dict import set_state_dict

WIDTHS = (6, 10, 5)  # 10 and 5 rows: uneven shards over 4 and over 3 ranks
BATCH = 12  # divisible by 4, 3 and 2 ranks
STEPS = 3  # steps before the sharded save
ASYNC_STEPS, EVERY = 4, 2  # the sync/async runs save at steps 2 and 4
TIMEOUT = 60.0


def batches(n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return regression_batches(n, BATCH, WIDTHS[0], WIDTHS[-1])


def reference_state(steps: int) -> dict[str, torch.Tensor]:
    """Unsharded model and Adam state after ``steps`` whole-batch steps, one process."""
    model = mlp(WIDTHS, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for x, y in batches(steps):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()
    out = {f"model.{k}": v.detach().clone() for k, v in model.named_parameters()}
    for name, p in model.named_parameters():
        for k, v in opt.state[p].items():
            out[f"optim.{name}.{k}"] = v.clone()
    return out


def save_run(root: str) -> dict:
    shapes = save_sharded(str(Path(root) / "sharded"), WIDTHS, batches(STEPS))
    timings = compare_checkpointing(
        str(Path(root) / "modes"), WIDTHS, batches(ASYNC_STEPS), EVERY
    )
    return {"shapes": shapes, "timings": timings}


class DyingWriter(FileSystemWriter):
    """DCP's file writer, except that rank 1 writes half of its shard and dies."""

    def write_data(self, plan, planner):
        future = super().write_data(plan, planner)
        if dist.get_rank() == 1:
            future.wait()
            for f in Path(self.path).glob("__1_*.distcp"):
                os.truncate(f, f.stat().st_size // 2)
            os._exit(1)  # no exception, no clean-up: as a killed process
        return future


def crash_run(root: str) -> None:
    model, optimizer = sharded_mlp(WIDTHS)
    data = batches(2)
    train_steps(model, optimizer, data[:1])
    atomic_save(training_state(model, optimizer), root, 1)
    train_steps(model, optimizer, data[1:])
    atomic_save(training_state(model, optimizer), root, 2, storage_writer=DyingWriter)


def _load_latest(root: str) -> tuple[int, dict[str, torch.Tensor]]:
    model, optimizer = sharded_mlp(WIDTHS, seed=1)
    state = training_state(model, optimizer)
    step = load_latest(state, root)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    return step, full_tensors(training_state(model, optimizer))


def load_run(root: str) -> dict:
    modes = Path(root) / "modes"
    out = {"sharded": load_sharded(str(Path(root) / "sharded"))}
    for mode in ("sync", "async"):
        for step in range(EVERY, ASYNC_STEPS + 1, EVERY):
            out[f"{mode}/{step}"] = load_sharded(str(modes / mode / f"step_{step}"))
    out["atomic"] = _load_latest(str(Path(root) / "atomic"))
    return out
