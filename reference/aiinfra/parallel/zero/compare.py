"""Our ZeRO against DeepSpeed and FSDP2: one model, one data stream, one loss curve.

A ZeRO stage changes where the model states live, not what the optimizer computes, so
every stage of every implementation must follow the loss curve of one process that
trains on the whole batch, up to float rounding. We train the toy model of
:mod:`aiinfra.parallel.toy` with AdamW in fp32 four ways on the same ranks: our stages
1-3, DeepSpeed's (``deepspeed.initialize`` with ``zero_optimization.stage``; Rasley et
al. 2020), PyTorch's ``fully_shard`` (FSDP2, which shards like stage 3; Zhao et al.
2023) and one process. All of them run the usual recipe: the global gradient norm
clipped to ``MAX_GRAD_NORM`` (DeepSpeed's ``gradient_clipping``, 1.0 by default in
0.19; the toy's norms stay below 1, so a smaller cap makes every step clip) and two
AdamW parameter groups, biases undecayed. DeepSpeed keeps a client optimizer's
parameter groups as they are (it flattens each group on its own), so the groups are
built here, by :func:`~aiinfra.parallel.zero.optim.decay_groups`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.distributed import rank_device, run_distributed
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.parallel.zero.optim import decay_groups
from aiinfra.parallel.zero.stage1 import Zero1
from aiinfra.parallel.zero.stage2 import Zero2
from aiinfra.parallel.zero.stage3 import Zero3

STAGES = {1: Zero1, 2: Zero2, 3: Zero3}
WIDTHS = (6, 7, 9, 3)  # 151 parameters in units of 49, 72 and 30: not divisible by 4
ADAMW = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}
MAX_GRAD_NORM = 0.25  # below every step's gradient norm: clipping always acts
NO_DECAY_NDIM = 2  # biases (1 dimension) get no weight decay
RECIPE = {**ADAMW, "max_grad_norm": MAX_GRAD_NORM, "no_decay_ndim": NO_DECAY_NDIM}
Batches = list[tuple[torch.Tensor, torch.Tensor]]


def _local_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """MSE of this rank's share of the batch (the world's mean of them is the loss)."""
    rank, n_ranks = dist.get_rank(), dist.get_world_size()
    return nn.functional.mse_loss(
        model(rank_share(x, rank, n_ranks)), rank_share(y, rank, n_ranks)
    )


def adamw_groups(model: nn.Module) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` over two groups: decayed weights, undecayed biases."""
    decay, no_decay = decay_groups(list(model.parameters()), NO_DECAY_NDIM)
    groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, **ADAMW)


def train_one_process(
    widths: Sequence[int], batches: Batches, norms: list[float] | None = None
) -> list[float]:
    """AdamW (two groups) with clipping on the whole batch, in this process only.

    Args:
        widths: the toy model's layer widths.
        batches: ``(x, y)`` per step.
        norms: if given, each step's gradient norm before clipping is appended.

    Returns:
        The loss of each step, before its update.
    """
    model = mlp(widths, device=batches[0][0].device)
    optimizer = adamw_groups(model)
    losses = []
    for x, y in batches:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if norms is not None:
            norms.append(norm.item())
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def train_ours(stage: int, widths: Sequence[int], batches: Batches) -> list[float]:
    """Our ZeRO ``stage`` (1-3); returns this rank's local losses."""
    model = mlp(widths, device=batches[0][0].device)
    zero = STAGES[stage](model, **RECIPE)
    losses = []
    for x, y in batches:
        loss = _local_loss(model, x, y)
        loss.backward()
        zero.step()
        zero.zero_grad()
        losses.append(loss.item())
    return losses


def _without_shm_kernel(deepspeed) -> None:  # noqa: ANN001 - the module
    """Keep DeepSpeed on plain gloo collectives on a CPU.

    On a CPU, DeepSpeed's communication backend JIT-compiles a shared-memory
    all-reduce kernel (``ShareMemCommBuilder``; about a minute of g++ on two cores)
    when it starts. It only speeds up intra-node collectives: the comparison is of
    losses, so the builder is marked incompatible and DeepSpeed uses torch's gloo
    collectives, as ours do. A GPU run is unaffected (its collectives are NCCL's).
    """
    from deepspeed.accelerator import get_accelerator

    if get_accelerator().device_name() == "cpu":
        builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
        if builder is not None:
            deepspeed.ops.__compatible_ops__[builder.NAME] = False


def train_deepspeed(stage: int, widths: Sequence[int], batches: Batches) -> list[float]:
    """DeepSpeed ZeRO ``stage`` with a plain ``torch.optim.AdamW`` (no fused kernel)."""
    import deepspeed  # optional: imported only where this comparison runs

    _without_shm_kernel(deepspeed)
    model = mlp(widths, device=batches[0][0].device)
    config = {
        "train_micro_batch_size_per_gpu": len(batches[0][0]) // dist.get_world_size(),
        "gradient_accumulation_steps": 1,
        "gradient_clipping": MAX_GRAD_NORM,  # DeepSpeed's default is 1.0
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,  # a client optimizer, wrapped as is
        "steps_per_print": 2**31,
    }
    engine, *_ = deepspeed.initialize(
        model=model,
        optimizer=adamw_groups(model),
        config=config,
        dist_init_required=False,  # the gloo group of run_distributed
    )
    losses = []
    for x, y in batches:
        loss = _local_loss(engine, x, y)
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    engine.destroy()
    return losses


def train_fsdp2(widths: Sequence[int], batches: Batches) -> list[float]:
    """PyTorch's ``fully_shard`` on each layer, then on the root (FSDP2)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = batches[0][0].device
    model = mlp(widths, device=device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = adamw_groups(model)
    losses = []
    for x, y in batches:
        loss = _local_loss(model, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)  # DTensor norms
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def rank_losses(widths: Sequence[int], n_steps: int, batch: int) -> dict[str, list]:
    """Run on every rank: each implementation's local loss per step, by name.

    Everything runs on :func:`~aiinfra.distributed.rank_device`: the rank's GPU
    under NCCL, the CPU under gloo.
    """
    device = rank_device()
    batches = [
        (x.to(device), y.to(device))
        for x, y in regression_batches(n_steps, batch, widths[0], widths[-1])
    ]
    out = {"one process": train_one_process(widths, batches)}
    for stage in STAGES:
        out[f"ours ZeRO-{stage}"] = train_ours(stage, widths, batches)
    if importlib.util.find_spec("deepspeed") is not None:
        for stage in STAGES:
            out[f"DeepSpeed ZeRO-{stage}"] = train_deepspeed(stage, widths, batches)
    out["FSDP2 fully_shard"] = train_fsdp2(widths, batches)
    return out


def compare_losses(
    world_size: int = 2,
    widths: Sequence[int] = WIDTHS,
    n_steps: int = 6,
    batch: int = 24,
    timeout: float = 240.0,
    backend: str = "gloo",
) -> dict[str, list[float]]:
    """Per-step loss of the whole batch for each implementation, on spawned ranks.

    Args:
        world_size: N_d ranks.
        widths: the toy model's layer widths.
        n_steps: optimizer steps.
        batch: global batch B, divisible by ``world_size``.
        timeout: seconds for the whole run.
        backend: ``"gloo"`` (CPU) or ``"nccl"`` (one GPU per rank).

    Returns:
        ``{name: [loss per step]}``; a sharded run's loss is the mean of its ranks'.

    Raises:
        ValueError: ``batch`` is not divisible by ``world_size``, or ``n_steps`` < 1.
    """
    if batch % world_size:
        raise ValueError(f"batch={batch} is not divisible by world_size={world_size}")
    if n_steps < 1:
        raise ValueError(f"n_steps must be >= 1, got {n_steps}")
    per_rank = run_distributed(
        rank_losses,
        world_size,
        tuple(widths),
        n_steps,
        batch,
        backend=backend,
        timeout=timeout,
    )
    return {
        name: [sum(r[name][i] for r in per_rank) / world_size for i in range(n_steps)]
        for name in per_rank[0]
    }
