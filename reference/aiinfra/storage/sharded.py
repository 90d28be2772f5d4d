"""Sharded checkpoints: every rank writes its shard, any number of ranks reads them.

Under FSDP2 (``fully_shard``) each rank holds a row shard of every parameter and of
its optimizer states, as a ``DTensor`` placed ``Shard(0)`` on the data-parallel
mesh. Gathering the full state on one rank to save it would need Psi bytes of
memory there and one writer for the whole job; ``torch.distributed.checkpoint``
(DCP) has each rank write its own shards in parallel, and rank 0 a metadata file
that records which rows of which tensor every file holds. Loading inverts the
map: a job on another number of ranks asks for its own rows, and DCP reads them
from whichever files hold them (resharding). The model here is a two-layer MLP
whose widths (10 hidden rows, 5 outputs) do not divide 4 or 3 ranks, so shards are
uneven, as they are for real vocabularies.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from aiinfra.distributed import run_distributed
from aiinfra.parallel.toy import mlp, rank_share

METADATA = ".metadata"  # the file DCP's rank 0 writes last, naming every shard


def check_checkpoint_dir(checkpoint_dir: str | os.PathLike) -> Path:
    """The checkpoint folder as a path, once it is known to hold a DCP checkpoint.

    Raises:
        FileNotFoundError: ``checkpoint_dir`` or its ``.metadata`` file is missing.
    """
    path = Path(checkpoint_dir)
    if not (path / METADATA).is_file():
        raise FileNotFoundError(
            f"checkpoint_dir {str(path)!r} holds no DCP checkpoint (no {METADATA})"
        )
    return path


def sharded_mlp(
    widths: Sequence[int], seed: int = 0
) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The toy MLP (:func:`aiinfra.parallel.toy.mlp`) sharded over all ranks, and Adam.

    Call inside a running process group: each Linear, then the root, becomes an
    FSDP2 unit over a 1-D CPU mesh of the world, so every rank keeps a row shard of
    each parameter and, after a step, of its optimizer states.

    Args:
        widths: layer widths, input first.
        seed: seed of the initial weights, the same on every rank.

    Returns:
        The sharded model and ``torch.optim.Adam(lr=0.01)`` over its shards.
    """
    model = mlp(widths, seed)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def train_steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Sequence[tuple[Tensor, Tensor]],
) -> None:
    """One Adam step of mean squared error per batch, each rank on its share.

    FSDP2 averages the gradients over ranks, so with equal shares every step is the
    whole batch's step of one process.

    Args:
        model: the sharded model.
        optimizer: its optimizer.
        batches: ``(x, y)`` of shapes ``(B, D)``, ``(B, O)``; B a multiple of the
            world size.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    for x, y in batches:
        out = model(rank_share(x, rank, n))  # (B / N, O)
        loss = (out - rank_share(y, rank, n)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def training_state(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """What a checkpoint holds: ``{"model": ..., "optim": ...}`` keyed by FQN.

    ``get_state_dict`` names optimizer states by parameter name rather than by
    index and creates them (a zero step) if the optimizer has not stepped yet, so a
    fresh job has the tensors that a load fills.
    """
    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optim": optim_sd}


def saved_widths(checkpoint_dir: str | os.PathLike) -> list[int]:
    """The layer widths of the MLP saved in ``checkpoint_dir``, from DCP's metadata."""
    meta = dcp.FileSystemReader(checkpoint_dir).read_metadata().state_dict_metadata
    weights = sorted(
        (int(k.split(".")[1]), v.size)
        for k, v in meta.items()
        if k.startswith("model.") and k.endswith(".weight")
    )
    return [weights[0][1][1]] + [size[0] for _, size in weights]  # D, then rows


def full_tensors(state: dict) -> dict[str, Tensor]:
    """Flatten a :func:`training_state` to full tensors (a collective for DTensors).

    Returns:
        ``"model.<fqn>"`` and ``"optim.<fqn>.<state>"`` -> unsharded tensor.
    """
    flat = {f"model.{k}": v for k, v in state["model"].items()}
    for fqn, states in state["optim"]["state"].items():
        flat.update({f"optim.{fqn}.{k}": v for k, v in states.items()})
    return {
        k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone()
        for k, v in flat.items()
    }


def save_sharded(
    checkpoint_dir: str,
    widths: Sequence[int],
    batches: Sequence[tuple[Tensor, Tensor]],
    seed: int = 0,
) -> dict[str, tuple[int, ...]]:
    """On every rank: train :func:`sharded_mlp` on ``batches``, then save with DCP.

    Returns:
        This rank's local shard shape of each model tensor (uneven at the edges).
    """
    model, optimizer = sharded_mlp(widths, seed)
    train_steps(model, optimizer, batches)
    state = training_state(model, optimizer)
    dcp.save(state, checkpoint_id=checkpoint_dir)
    return {k: tuple(v.to_local().shape) for k, v in state["model"].items()}


def load_sharded(checkpoint_dir: str) -> dict[str, Tensor]:
    """On every rank: load a :func:`save_sharded` checkpoint onto this world.

    A fresh model of the saved widths (read from the metadata), its weights zeroed,
    is sharded over the current world; DCP reads each rank's rows, wherever they
    were written, and ``set_state_dict`` puts them into the model and the optimizer.

    Returns:
        The full tensors of the loaded state, as :func:`full_tensors`.
    """
    model, optimizer = sharded_mlp(saved_widths(checkpoint_dir))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()  # whatever the job holds after the load came from the files
    state = training_state(model, optimizer)
    dcp.load(state, checkpoint_id=checkpoint_dir)
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    return full_tensors(training_state(model, optimizer))


def reshard(checkpoint_dir: str, world_size: int, timeout: float = 60.0) -> dict:
    """Load a sharded checkpoint on ``world_size`` gloo ranks; rank 0's full tensors.

    Args:
        checkpoint_dir: a folder written by :func:`save_sharded`.
        world_size: ranks of the loading job, any number >= 1.
        timeout: seconds for the whole run.

    Returns:
        What :func:`load_sharded` returns on rank 0.

    Raises:
        ValueError: ``world_size`` < 1.
        FileNotFoundError: ``checkpoint_dir`` holds no checkpoint.
    """
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    path = check_checkpoint_dir(checkpoint_dir)
    return run_distributed(load_sharded, world_size, str(path), timeout=timeout)[0]
