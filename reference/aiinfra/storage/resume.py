"""An exact resume: what a checkpoint holds besides the weights and the optimizer.

Weights and optimizer state restart training, but not the *same* training. A run
resumed from them alone reads the data again from the start of its epoch (or in a
new order), draws new dropout masks, and restarts its learning-rate schedule. For a
resumed run to equal the uninterrupted one bit for bit, the checkpoint also holds:

- the data loader's position: the epoch and how many samples of its shuffled order
  were consumed, with the seed the order is drawn from (:class:`ResumableSampler`);
- the random number generators' states: torch's (dropout, initialisation), Python's
  and NumPy's (augmentation, sampling in user code); on a GPU also each device's
  CUDA generator (``torch.cuda.get_rng_state_all``);
- the learning-rate scheduler's ``state_dict`` (its step count).

:func:`resume_state` gathers them into one dict that DCP saves beside the model and
the optimizer (non-tensor values are pickled), and :func:`restore_resume_state` puts
them back. The sampler counts what the loop consumed, so the loader must not read
ahead of it: with worker processes, a loader prefetches batches the step has not
taken yet, and ``torchdata``'s ``StatefulDataLoader`` is what tracks that.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from aiinfra import checks


class ResumableSampler(Sampler[int]):
    """Indices ``0..n-1`` in a seeded shuffle per epoch, resumable mid-epoch.

    Epoch ``e`` visits ``torch.randperm(n)`` drawn from a generator seeded with
    ``seed + e``, so the order depends on nothing but the seed and the epoch, and
    the position is two integers.

    Args:
        n: samples in the dataset, >= 1.
        seed: the shuffle's seed.

    Raises:
        TypeError: ``n`` or ``seed`` is not an int.
        ValueError: ``n`` < 1.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        checks.positive_int("n", n)
        checks.integer("seed", seed)
        self.n, self.seed = n, seed
        self.epoch, self.index = 0, 0  # samples of this epoch already handed out

    def order(self, epoch: int) -> list[int]:
        """Epoch ``epoch``'s order of the sample indices."""
        generator = torch.Generator().manual_seed(self.seed + epoch)
        return torch.randperm(self.n, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        while True:  # epoch after epoch; the loop decides when to stop
            order = self.order(self.epoch)
            while self.index < self.n:
                self.index += 1
                yield order[self.index - 1]
            self.epoch, self.index = self.epoch + 1, 0

    def __len__(self) -> int:
        return self.n

    def state_dict(self) -> dict[str, int]:
        """The position: seed, epoch and samples of the epoch handed out."""
        return {"seed": self.seed, "epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from a position of :meth:`state_dict`.

        Raises:
            ValueError: the position was saved with another seed, or its index
                is outside ``0..n``.
        """
        if state["seed"] != self.seed:
            raise ValueError(f"state seed {state['seed']} != sampler seed {self.seed}")
        checks.integer("index", state["index"], low=0, high=self.n)
        self.epoch, self.index = int(state["epoch"]), int(state["index"])


def resume_state(
    sampler: ResumableSampler, scheduler: torch.optim.lr_scheduler.LRScheduler
) -> dict[str, Any]:
    """What an exact resume needs besides model and optimizer, to save with DCP.

    Args:
        sampler: the data loader's sampler.
        scheduler: the learning-rate scheduler.

    Returns:
        ``{"loader": ..., "scheduler": ..., "rng": {"torch", "python", "numpy"}}``.
    """
    # region resume-state
    return {
        "loader": sampler.state_dict(),
        "scheduler": scheduler.state_dict(),
        "rng": {
            "torch": torch.get_rng_state(),
            "python": random.getstate(),
            "numpy": np.random.get_state(),
        },
    }
    # endregion


def restore_resume_state(
    state: dict[str, Any],
    sampler: ResumableSampler,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> None:
    """Put back what :func:`resume_state` saved: position, schedule, generators."""
    sampler.load_state_dict(state["loader"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
