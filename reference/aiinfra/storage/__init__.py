"""Storage and checkpoints: what a training run writes, and how it reads its data.

Checkpoint sizes from the memory calculator and the time to write them
(:mod:`.sizes`); sharded checkpoints that load on another number of ranks
(:mod:`.sharded`, ``torch.distributed.checkpoint``); asynchronous saves that overlap
the write with training (:mod:`.async_checkpoint`); an all-or-nothing commit that
survives a rank dying mid-save (:mod:`.atomic`); the loader position, random
generators and schedule an exact resume needs (:mod:`.resume`); memory-mapped
token files read in fixed-length windows (:mod:`.data`); :mod:`.bench` measures them
(``aiinfra bench storage``, :mod:`.cli`).
"""

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.storage.async_checkpoint": (
            "CheckpointTiming",
            "checkpoint_overhead",
            "compare_checkpointing",
            "train_with_checkpoints",
        ),
        "aiinfra.storage.atomic": (
            "atomic_save",
            "committed_checkpoints",
            "latest_checkpoint",
            "load_latest",
            "step_dir",
        ),
        "aiinfra.storage.data": (
            "LoaderThroughput",
            "TokenWindows",
            "loader_throughput",
            "token_dtype",
            "write_token_file",
        ),
        "aiinfra.storage.resume": (
            "ResumableSampler",
            "restore_resume_state",
            "resume_state",
        ),
        "aiinfra.storage.sharded": (
            "check_checkpoint_dir",
            "full_tensors",
            "load_sharded",
            "reshard",
            "save_sharded",
            "saved_widths",
            "sharded_mlp",
            "train_steps",
            "training_state",
        ),
        "aiinfra.storage.sizes": (
            "CheckpointBytes",
            "inference_checkpoint_bytes",
            "optimizer_state_bytes",
            "training_checkpoint_bytes",
            "write_seconds",
        ),
    },
)
