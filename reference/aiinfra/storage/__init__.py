"""Storage and checkpoints: what a training run writes, and how it reads its data.

Checkpoint sizes from the memory calculator and the time to write them
(:mod:`.sizes`); sharded checkpoints that load on another number of ranks
(:mod:`.sharded`, ``torch.distributed.checkpoint``); asynchronous saves that overlap
the write with training (:mod:`.async_checkpoint`); an all-or-nothing commit that
survives a rank dying mid-save (:mod:`.atomic`); memory-mapped token files read in
fixed-length windows (:mod:`.data`); :mod:`.bench` measures them
(``aiinfra bench storage``, :mod:`.cli`).
"""

from aiinfra.storage.async_checkpoint import (
    CheckpointTiming,
    checkpoint_overhead,
    compare_checkpointing,
    train_with_checkpoints,
)
from aiinfra.storage.atomic import (
    atomic_save,
    committed_checkpoints,
    latest_checkpoint,
    load_latest,
    step_dir,
)
from aiinfra.storage.data import (
    LoaderThroughput,
    TokenWindows,
    loader_throughput,
    token_dtype,
    write_token_file,
)
from aiinfra.storage.sharded import (
    check_checkpoint_dir,
    full_tensors,
    load_sharded,
    reshard,
    save_sharded,
    saved_widths,
    sharded_mlp,
    train_steps,
    training_state,
)
from aiinfra.storage.sizes import (
    CheckpointBytes,
    inference_checkpoint_bytes,
    optimizer_state_bytes,
    training_checkpoint_bytes,
    write_seconds,
)

__all__ = [
    "CheckpointBytes",
    "CheckpointTiming",
    "LoaderThroughput",
    "TokenWindows",
    "atomic_save",
    "check_checkpoint_dir",
    "checkpoint_overhead",
    "committed_checkpoints",
    "compare_checkpointing",
    "full_tensors",
    "inference_checkpoint_bytes",
    "latest_checkpoint",
    "load_latest",
    "load_sharded",
    "loader_throughput",
    "optimizer_state_bytes",
    "reshard",
    "save_sharded",
    "saved_widths",
    "sharded_mlp",
    "step_dir",
    "token_dtype",
    "train_steps",
    "train_with_checkpoints",
    "training_checkpoint_bytes",
    "training_state",
    "write_seconds",
    "write_token_file",
]
