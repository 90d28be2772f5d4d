"""The job's entry point: a torchrun worker that resumes from the latest checkpoint.

``torchrun`` starts an *elastic agent* on each node, and the agent starts
``--nproc-per-node`` workers running this module. When a worker dies, the agent does
not replace that one process: it stops every worker of the group, joins the
rendezvous again (where the other nodes' agents meet it, so the world may change
size), and starts them all anew, up to ``--max-restarts`` times;
``TORCHELASTIC_RESTART_COUNT`` tells a worker which attempt it is. Nothing in memory
survives, so a worker first loads the newest committed checkpoint
(:mod:`aiinfra.storage.atomic`) and carries on from its step: at most ``every - 1``
steps are trained twice. Each step's batch depends on the step alone, so a run that
fails and resumes ends with the weights of one that never failed. The agent's own
TCPStore, which workers share by default, keeps the previous attempt's addresses, and
a restarted group cannot connect (pytorch/pytorch#135712); restarts need
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` in torchrun's environment. With
``--metrics-port`` (or ``AIINFRA_METRICS_PORT``, which the rendered pod sets), local
rank 0 of each pod serves the step's metrics at ``/metrics`` for Prometheus
(:class:`aiinfra.cloud.metrics.TrainingExporter`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP

from aiinfra.cloud.job import METRICS_PORT_ENV, RESTART_ENV
from aiinfra.distributed import rank_device
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.storage import atomic_save, latest_checkpoint, load_latest, training_state

if TYPE_CHECKING:  # prometheus_client is imported only when metrics are served
    from aiinfra.cloud.metrics import TrainingExporter

WIDTHS = (8, 16, 4)  # two Linear layers: small enough to checkpoint in milliseconds
BATCH = 8  # global batch; divisible by 1, 2, 4 and 8 ranks
PROGRESS = "progress"  # folder of the per-rank, per-attempt records in the ckpt dir
BACKENDS = ("auto", "gloo", "nccl")


@dataclass(frozen=True)
class TrainConfig:
    """What one run trains and where it keeps its checkpoints.

    Attributes:
        steps: train until this step (counted from 1 over the whole run).
        every: commit a checkpoint after every ``every``-th step, and the last.
        ckpt_dir: the run's checkpoints and progress records, shared by restarts.
        fail_at_step: when set, rank ``fail_rank`` dies before this step on the
            first attempt, as a killed worker would.
        fail_rank: the rank that dies.
        backend: ``"auto"`` (NCCL when CUDA is present, else gloo), or either one.
        metrics_port: when set, local rank 0 serves ``/metrics`` on this port on
            every interface (0: any free port); ``None``: no metrics.
        peak_flops: the device's peak FLOP/s at the training dtype, for MFU;
            required with ``metrics_port``.
    """

    steps: int
    every: int
    ckpt_dir: str
    fail_at_step: int | None = None
    fail_rank: int = 0
    backend: str = "auto"
    metrics_port: int | None = None
    peak_flops: float | None = None


@dataclass(frozen=True)
class ElasticEnv:
    """What torchrun tells each worker: who it is, and which attempt this is."""

    rank: int
    world_size: int
    local_rank: int
    attempt: int  # TORCHELASTIC_RESTART_COUNT: 0 on the first start
    local_world_size: int = 1  # workers in this pod (torchrun's --nproc-per-node)


def elastic_env(environ: Mapping[str, str]) -> ElasticEnv:
    """Read this worker's identity from torchrun's environment.

    Raises:
        RuntimeError: ``RANK``, ``WORLD_SIZE`` or ``LOCAL_RANK`` is missing (not
            started by torchrun), or restarts are allowed while the workers share
            the agent's store, where a restarted group cannot connect.
    """
    missing = [k for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK") if k not in environ]
    if missing:
        raise RuntimeError(
            f"aiinfra.cloud.train must be started by torchrun, which sets "
            f"{', '.join(missing)}: torchrun --standalone --nproc-per-node 2 "
            f"-m aiinfra.cloud.train --steps 8 --every 2 --ckpt-dir ckpt"
        )
    restarts = int(environ.get("TORCHELASTIC_MAX_RESTARTS", "0"))
    if environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" and restarts > 0:
        raise RuntimeError(
            f"--max-restarts {restarts} needs {RESTART_ENV}=1 "
            f"in torchrun's environment: on the agent's shared store a restarted "
            f"group reads the last attempt's addresses (pytorch/pytorch#135712)"
        )
    return ElasticEnv(
        rank=int(environ["RANK"]),
        world_size=int(environ["WORLD_SIZE"]),
        local_rank=int(environ["LOCAL_RANK"]),
        attempt=int(environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
        local_world_size=int(environ.get("LOCAL_WORLD_SIZE", "1")),
    )


def check_config(config: TrainConfig, world_size: int) -> None:
    """Reject a run that cannot work, on every rank alike, before any collective.

    Raises:
        ValueError: ``steps`` or ``every`` < 1, ``fail_at_step`` not in
            ``every + 1..steps``, ``fail_rank`` not a rank, or an uneven batch.
    """
    if config.steps < 1:
        raise ValueError(f"steps must be >= 1, got {config.steps}")
    if config.every < 1:
        raise ValueError(f"every must be >= 1, got {config.every}")
    if config.fail_at_step is not None and not (
        config.every < config.fail_at_step <= config.steps
    ):
        raise ValueError(
            f"fail_at_step must be in {config.every + 1}..{config.steps} (after the "
            f"first checkpoint, at most steps), got {config.fail_at_step}"
        )
    if not 0 <= config.fail_rank < world_size:
        raise ValueError(
            f"fail_rank must be in 0..{world_size - 1}, got {config.fail_rank}"
        )
    if BATCH % world_size:
        raise ValueError(f"world_size must divide the batch {BATCH}, got {world_size}")
    if config.metrics_port is not None:
        if not 0 <= config.metrics_port <= 65535:
            raise ValueError(
                f"metrics_port must be in 0..65535, got {config.metrics_port}"
            )
        if config.peak_flops is None or not config.peak_flops > 0:
            raise ValueError(
                f"peak_flops must be > 0 with metrics_port (the device's peak "
                f"FLOP/s, for MFU), got {config.peak_flops}"
            )


def checksum(model: torch.nn.Module) -> str:
    """SHA-256 of the parameters' bytes: equal only for bit-identical replicas."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def write_progress(root: Path, env: ElasticEnv, record: dict) -> None:
    """Write this rank's record of this attempt, ``progress/attempt<a>_rank<r>``."""
    folder = root / PROGRESS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"attempt{env.attempt}_rank{env.rank}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**asdict(env), **record}, indent=1))
    os.replace(tmp, path)  # a reader never sees half a record


def train(
    config: TrainConfig, env: ElasticEnv, exporter: TrainingExporter | None = None
) -> dict:
    """On every worker: resume from the latest checkpoint and train to the end.

    Call inside a running process group.

    Args:
        config: the run.
        env: this worker's identity.
        exporter: a :class:`~aiinfra.cloud.metrics.TrainingExporter` that records
            each step for this pod (local rank 0's), or ``None``.

    Returns:
        This attempt's record: the step it resumed from (``None`` on a fresh
        start), the final step, the whole batch's loss at it, and :func:`checksum`.
    """
    root = Path(config.ckpt_dir)
    root.mkdir(parents=True, exist_ok=True)
    device = rank_device()
    model = DDP(mlp(WIDTHS, seed=0, device=device))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    resumed = None
    # region resume
    if latest_checkpoint(root) is not None:
        state = training_state(model, optimizer)
        resumed = load_latest(state, root)  # the step of the commit it names
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
        )
    # endregion
    record = {"resumed_from": resumed, "final_step": None, "final_loss": None}
    write_progress(root, env, record)  # final_step stays None if this attempt dies
    last = (resumed, None)  # (step, whole-batch loss) of the last step trained
    data = regression_batches(config.steps, BATCH, WIDTHS[0], WIDTHS[-1])
    # A sample counts as a token; Kaplan's 6N FLOPs each, forward and backward.
    flops_per_sample = 6 * sum(p.numel() for p in model.parameters())
    pod_samples = BATCH // env.world_size * env.local_world_size  # this pod's share
    for step in range(1 + (resumed or 0), config.steps + 1):
        start = time.perf_counter()
        if (step, env.attempt, env.rank) == (config.fail_at_step, 0, config.fail_rank):
            write_progress(root, env, {**record, "killed_at_step": step})
            os._exit(1)  # no exception, no clean-up: as a worker the OOM killer hit
        x, y = (t.to(device) for t in data[step - 1])  # (B, D), (B, O)
        out = model(rank_share(x, env.rank, env.world_size))  # (B / N, O)
        loss = (out - rank_share(y, env.rank, env.world_size)).pow(2).mean()
        loss.backward()  # DDP averages the gradients over the ranks
        optimizer.step()
        optimizer.zero_grad()
        if step % config.every == 0 or step == config.steps:
            atomic_save(training_state(model, optimizer), root, step)
        # Equal shares: the mean of the local losses is the whole batch's loss.
        total = loss.detach().clone()
        dist.all_reduce(total)  # gloo has no AVG: sum, then divide
        last = (step, total.item() / env.world_size)
        if exporter is not None:  # the all-reduce above ended the step on every rank
            seconds = time.perf_counter() - start
            exporter.observe_step(
                seconds, pod_samples, last[1], flops_per_sample, config.peak_flops
            )
        if env.rank == 0:
            print(f"attempt {env.attempt} step {step} loss {last[1]:.6f}", flush=True)
    record.update(final_step=last[0], final_loss=last[1], checksum=checksum(model))
    write_progress(root, env, record)
    return record


def parse_args(argv: Sequence[str] | None = None) -> TrainConfig:
    """The command line, ``--steps N --every K --ckpt-dir DIR [...]``."""
    parser = argparse.ArgumentParser(prog="aiinfra.cloud.train", description=__doc__)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--every", type=int, required=True)
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--fail-at-step", type=int)
    parser.add_argument("--fail-rank", type=int, default=0)
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument(
        "--metrics-port",
        type=int,
        help=f"serve /metrics on this port (default: ${METRICS_PORT_ENV}, if set)",
    )
    parser.add_argument("--peak-flops", type=float, help="peak FLOP/s, for MFU")
    return TrainConfig(**vars(parser.parse_args(argv)))


def main(argv: Sequence[str] | None = None) -> None:
    """Parse, check, join the process group, train, leave.

    Raises:
        SystemExit: not started by torchrun, or a bad argument (the message says).
    """
    config = parse_args(argv)
    if config.metrics_port is None and os.environ.get(METRICS_PORT_ENV):
        # The rendered pod names its container port in the environment.
        config = replace(config, metrics_port=int(os.environ[METRICS_PORT_ENV]))
    try:
        env = elastic_env(os.environ)
        check_config(config, env.world_size)
    except (RuntimeError, ValueError) as e:
        raise SystemExit(f"aiinfra.cloud.train: error: {e}") from e
    backend = config.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(env.local_rank)
    # The rendezvous address comes from torchrun (MASTER_ADDR/PORT): env:// init.
    dist.init_process_group(backend, timeout=timedelta(minutes=5))
    exporter = None
    if config.metrics_port is not None and env.local_rank == 0:
        from aiinfra.cloud.metrics import TrainingExporter  # prometheus_client

        exporter = TrainingExporter(rank_device())
        port = exporter.start(config.metrics_port, addr="0.0.0.0")  # scraped by pod IP
        print(f"serving metrics on port {port}", flush=True)
    try:
        train(config, env, exporter)
    finally:
        if exporter is not None:
            exporter.close()
        dist.destroy_process_group()


if __name__ == "__main__":  # python -m aiinfra.cloud.train, as torchrun -m needs
    main()
