"""What ``aiinfra bench storage`` measures: checkpoints and a loader, on this machine.

Four spawns of gloo ranks: 4 ranks save a DCP checkpoint of the sharded MLP; 2
ranks commit a checkpoint atomically and one of them is killed halfway through the
next; 2 ranks load the 4-rank checkpoint, restart the killed run and time a
training loop without saves, with synchronous and with asynchronous ones; 3 ranks
load the 4-rank checkpoint. The loaded tensors are compared with those saved (the
largest absolute difference), and DCP's metadata says which rows each file holds.
Then, in this process, a memory-mapped token file is read through a
``DataLoader`` with 0 and 2 workers and its tokens/s compared with what one
training step of a small Transformer on the same batch consumes.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch.distributed.checkpoint import FileSystemWriter, SavePlan, SavePlanner
from torch.futures import Future

from aiinfra.distributed import run_distributed
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer
from aiinfra.parallel.toy import regression_batches
from aiinfra.storage import atomic, data, sharded
from aiinfra.storage.async_checkpoint import CheckpointTiming, compare_checkpointing

SAVE_RANKS, LOAD_RANKS = 4, (2, 3)  # saved on 4 ranks, loaded on 2 and on 3
TIMED_RANKS = 2  # the none/sync/async loops run in the spawn of 2 ranks
RESHARD_WIDTHS = (6, 10, 5)  # 10 and 5 rows: uneven shards over 4 and 3 ranks
KILLED_RANK = 1  # the rank that dies halfway through the second atomic save
LOADER_WORKERS = (0, 2)


@dataclass(frozen=True)
class StorageBenchConfig:
    """Sizes of ``aiinfra bench storage``; the defaults run in about a minute.

    Attributes:
        width: w; the MLP of the sync/async runs is w -> 4w -> w (8 w^2 weights).
        steps: training steps of each sync/async run.
        every: k, steps between saves.
        batch: rows per step of those runs, a multiple of the 2 ranks.
        seq_len: T, tokens per sequence of the loader and of the training step.
        loader_batch: B, sequences per batch of the loader and of the step.
        loader_batches: batches timed per loader.
        vocab_size: V of the token file and of the model.
        d_model: width of the model whose step sets the needed rate.
        n_layers: its layers.
    """

    width: int = 1024
    steps: int = 20
    every: int = 5
    batch: int = 64
    seq_len: int = 128
    loader_batch: int = 8
    loader_batches: int = 200
    vocab_size: int = 50_257  # GPT-2's: ids fit uint16
    d_model: int = 64
    n_layers: int = 2

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.every > self.steps:
            raise ValueError(f"every must be <= steps = {self.steps}, got {self.every}")
        if self.batch % TIMED_RANKS:
            raise ValueError(
                f"batch must be a multiple of {TIMED_RANKS}, got {self.batch}"
            )

    @property
    def tokens(self) -> int:
        """Tokens in the file: the timed batches, the first one and one more."""
        return (self.loader_batches + 2) * self.loader_batch * self.seq_len + 1


class _KilledWriter(FileSystemWriter):
    """DCP's file writer, except that rank 1 writes half of its shard and dies."""

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        future = super().write_data(plan, planner)
        if dist.get_rank() == KILLED_RANK:
            future.wait()
            for f in Path(self.path).glob(f"__{KILLED_RANK}_*.distcp"):
                os.truncate(f, f.stat().st_size // 2)
            os._exit(1)  # no exception, no clean-up: as a killed process
        return future


def _save_rank(root: str) -> dict[str, torch.Tensor] | None:
    """4 ranks: train the small MLP, save it with DCP; rank 0's full tensors."""
    model, optimizer = sharded.sharded_mlp(RESHARD_WIDTHS)
    sharded.train_steps(model, optimizer, regression_batches(3, 12, 6, 5))
    state = sharded.training_state(model, optimizer)
    dcp.save(state, checkpoint_id=Path(root) / "sharded")
    saved = sharded.full_tensors(state)  # a collective: every rank calls it
    return saved if dist.get_rank() == 0 else None


def _crash_rank(root: str) -> None:
    """2 ranks: commit step 1 atomically; rank 1 dies halfway through step 2."""
    model, optimizer = sharded.sharded_mlp(RESHARD_WIDTHS)
    batches = regression_batches(2, 12, 6, 5)
    sharded.train_steps(model, optimizer, batches[:1])
    atomic.atomic_save(sharded.training_state(model, optimizer), root, 1)
    sharded.train_steps(model, optimizer, batches[1:])
    state = sharded.training_state(model, optimizer)
    atomic.atomic_save(state, root, 2, storage_writer=_KilledWriter)


def _load_rank(root: str, cfg: StorageBenchConfig) -> dict[str, Any]:
    """Load the 4-rank checkpoint; on 2 ranks also restart and time the saves."""
    loaded = sharded.load_sharded(str(Path(root) / "sharded"))
    model, optimizer = sharded.sharded_mlp(RESHARD_WIDTHS, seed=1)
    rows = {k: v.to_local().shape[0] for k, v in model.state_dict().items()}
    out = {"loaded": loaded, "rows": rows}
    if dist.get_world_size() == TIMED_RANKS:
        state = sharded.training_state(model, optimizer)
        out["step"] = atomic.load_latest(state, Path(root) / "atomic")
        w = cfg.width
        batches = regression_batches(cfg.steps, cfg.batch, w, w)
        out["timings"] = compare_checkpointing(
            str(Path(root) / "modes"), (w, 4 * w, w), batches, cfg.every
        )
    return out


def _saved_chunks(path: Path) -> dict[str, list[list]]:
    """Model tensor -> ``[first row, rows, file]`` of each chunk DCP wrote."""
    meta = dcp.FileSystemReader(path).read_metadata()
    out: dict[str, list[list]] = {}
    for index, info in meta.storage_data.items():
        if index.fqn.startswith("model."):
            size = meta.state_dict_metadata[index.fqn].chunks[index.index].sizes[0]
            out.setdefault(index.fqn, []).append(
                [index.offset[0], size, info.relative_path]
            )
    return {k: sorted(v) for k, v in sorted(out.items())}


def _du(path: Path) -> tuple[int, int]:
    """Bytes and files under ``path``."""
    files = [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files), len(files)


def _crash(root: Path, timeout: float) -> dict[str, Any]:
    """Run the crash spawn (it fails by design); what it left on disk."""
    try:
        run_distributed(_crash_rank, 2, str(root), timeout=timeout)
    except RuntimeError as exc:
        error = str(exc).splitlines()[0]
    else:
        raise RuntimeError("the crash run finished: no rank was killed")
    partial = root / ".tmp-step_00000002"
    return {
        "error": error,
        "pointer": (root / atomic.LATEST).read_text().strip(),
        "latest": atomic.latest_checkpoint(root).name,
        "committed": [p.name for p in atomic.committed_checkpoints(root)],
        "partial_files": {f.name: f.stat().st_size for f in sorted(partial.iterdir())},
    }


def _modes(timings: dict[str, CheckpointTiming]) -> dict[str, Any]:
    """Each mode's timing with its per-step means in ms, and the hidden fraction."""
    modes = {
        m: asdict(t)
        | {
            "step_ms": 1e3 * t.step_seconds,
            "blocked_ms_per_step": 1e3 * t.overhead_per_step,
        }
        for m, t in timings.items()
    }
    hidden = 1 - timings["async"].blocked_seconds / timings["sync"].blocked_seconds
    return {"modes": modes, "hidden_fraction": hidden}


def _step_seconds(cfg: StorageBenchConfig) -> float:
    """Median wall time of one AdamW step of the small Transformer on B x T tokens."""
    config = TransformerConfig(
        vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        n_layers=cfg.n_layers,
        max_seq_len=cfg.seq_len,
    )
    model = Transformer(config)
    optimizer = torch.optim.AdamW(model.parameters())
    g = torch.Generator().manual_seed(0)
    x = torch.randint(cfg.vocab_size, (cfg.loader_batch, cfg.seq_len + 1), generator=g)
    times = []
    for _ in range(3):  # the first is a warm-up
        t = time.perf_counter()
        logits = model(x[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def _loader(root: Path, cfg: StorageBenchConfig) -> dict[str, Any]:
    """Loader tokens/s with 0 and 2 workers against a step's consumption."""
    tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, cfg.tokens)
    dtype = data.write_token_file(root / "tokens.bin", tokens, cfg.vocab_size)
    windows = data.TokenWindows(root / "tokens.bin", cfg.seq_len, dtype)
    step_tokens, step_s = cfg.loader_batch * cfg.seq_len, _step_seconds(cfg)
    rows = []
    for w in LOADER_WORKERS:
        r = data.loader_throughput(
            windows, cfg.loader_batch, w, step_tokens, step_s, cfg.loader_batches
        )
        rows.append(asdict(r) | {"keeps_up": r.keeps_up})
    return {
        "step_seconds": step_s,
        "tokens_per_step": step_tokens,
        "dtype": dtype.name,
        "rows": rows,
    }


def run_bench(cfg: StorageBenchConfig, timeout: float = 120.0) -> dict[str, Any]:
    """Run the four spawns and the loaders; every number the pages show.

    Returns:
        ``reshard`` (bytes, files, the chunks of each tensor, per loading world
        size the largest difference and each rank's rows), ``checkpointing`` (per
        mode the timing of the slower rank, the hidden fraction), ``atomic`` (what
        the disk held after the kill, the step a restart loaded), ``loader``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        saved = run_distributed(_save_rank, SAVE_RANKS, str(root), timeout=timeout)[0]
        crash = _crash(root / "atomic", timeout)
        loads, timed = {}, None
        for n in LOAD_RANKS:
            ranks = run_distributed(_load_rank, n, str(root), cfg, timeout=timeout)
            diff = max(
                (ranks[0]["loaded"][k] - v).abs().max().item() for k, v in saved.items()
            )
            loads[str(n)] = {
                "max_abs_diff": diff,
                "same_keys": sorted(ranks[0]["loaded"]) == sorted(saved),
                "rows": {k: [r["rows"][k] for r in ranks] for k in ranks[0]["rows"]},
            }
            if n == TIMED_RANKS:
                crash["restarted_at_step"] = ranks[0]["step"]
                timed = {  # the slower rank sets the job's pace
                    m: max((r["timings"][m] for r in ranks), key=lambda t: t.seconds)
                    for m in ranks[0]["timings"]
                }
        n_bytes, n_files = _du(root / "sharded")
        reshard = {
            "widths": list(RESHARD_WIDTHS),
            "bytes": n_bytes,
            "files": n_files,
            "tensors": len(saved),
            "chunks": _saved_chunks(root / "sharded"),
            "loads": loads,
        }
        ckpt_bytes, _ = _du(root / "modes" / "sync" / f"step_{cfg.every}")
        loader = _loader(root, cfg)
    config = asdict(cfg) | {"save_ranks": SAVE_RANKS, "timed_ranks": TIMED_RANKS}
    return {
        "config": config,
        "reshard": reshard,
        "checkpointing": {"checkpoint_bytes": ckpt_bytes, **_modes(timed)},
        "atomic": crash,
        "loader": loader,
    }
