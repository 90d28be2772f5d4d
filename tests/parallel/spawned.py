"""The rank side of the data-parallel and ZeRO tests: one spawn runs every check.

Starting ranks costs seconds each (every rank imports torch), so ``test_ddp`` and
``test_zero`` share one spawn of 4 gloo ranks, cached for the session: the checks run
on the world (N = 4) and, side by side, on the pairs [0, 2] and [1, 3] (N = 2, group
ranks differing from global ranks). The spawned function returns plain numbers and
strings; the tests assert on them. The NCCL tests (``test_nccl``) run the very same
:func:`ddp_checks` and :func:`zero_checks` on the GPUs present: only the device that
:func:`~aiinfra.distributed.rank_device` returns differs.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device, run_distributed
from aiinfra.parallel.ddp_bucketed import BucketedDDP
from aiinfra.parallel.ddp_naive import NaiveDDP
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.parallel.zero_compare import ADAMW, STAGES
from aiinfra.parallel.zero_compare import WIDTHS as ZERO_WIDTHS
from aiinfra.parallel.zero_memory import MEMORY_WIDTHS, measure_stages
from torch import nn

from tests.shared_spawn import shared_results

STEPS = 5
BATCH = 24  # divisible by 2 and 4 ranks, and by 3 micro-batches per rank
WIDTHS = (6, 16, 16, 3)  # DDP's model: 435 parameters in 6 tensors
DDP_KINDS = ["naive", "bucketed-64", "bucketed-600", "bucketed-1000000", "torch"]


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def _flat(params) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in params])


def _batches(device: torch.device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    data = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    return [(x.to(device), y.to(device)) for x, y in data]


def _optimizer(name: str, params) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1)


def _ddp_devices(wrapped: nn.Module) -> set[str]:
    """Every device a wrapper's parameters, gradients and buffers are on."""
    tensors = list(wrapped.parameters())
    tensors += [p.grad for p in wrapped.parameters() if p.grad is not None]
    tensors += [b.buffer for b in getattr(wrapped, "buckets", [])]
    return {str(t.device) for t in tensors}


def train_ddp(kind, opt_name, group, device, micro=1):
    """Train a fresh model with ``kind``; each rank takes its share of every batch.

    ``kind`` ``"single"`` is one process on the whole batch: the ground truth.
    Returns the final parameters, flat, and the devices the wrapper used.
    """
    single = kind == "single"
    rank = 0 if single else dist.get_rank(group)
    n_ranks = 1 if single else dist.get_world_size(group)
    # Different on each rank (group rank as seed): the broadcast from group rank 0
    # must make every replica the one-process model (seed 0).
    model = mlp(WIDTHS, seed=rank, device=device)
    if kind == "naive":
        wrapped = NaiveDDP(model, group)
    elif kind.startswith("bucketed"):
        wrapped = BucketedDDP(model, group, bucket_bytes=int(kind.split("-")[1]))
    elif kind == "torch":
        wrapped = nn.parallel.DistributedDataParallel(
            model, bucket_cap_mb=0.001, process_group=group
        )
    else:
        wrapped = model
    opt = _optimizer(opt_name, model.parameters())
    for x, y in _batches(device):
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        opt.zero_grad()
        for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro), strict=True)):
            last = i == micro - 1
            with contextlib.nullcontext() if last else wrapped.no_sync():
                (nn.functional.mse_loss(wrapped(xm), ym) / micro).backward()
        if kind == "naive":
            wrapped.sync_gradients()
        opt.step()
    return _flat(model.parameters()), _ddp_devices(wrapped)


def ddp_checks(group: dist.ProcessGroup | None) -> dict:
    """Ours against one process and DistributedDataParallel; replicas; traffic."""
    device = rank_device(group)
    n_ranks = dist.get_world_size(group)
    out = {"to_one_process": {}, "to_torch": {}, "between_ranks": {}, "devices": {}}
    for opt_name in ("sgd", "adamw"):
        reference, _ = train_ddp("single", opt_name, group, device)
        theirs, _ = train_ddp("torch", opt_name, group, device)
        for kind in DDP_KINDS:
            ours, devices = train_ddp(kind, opt_name, group, device)
            key = f"{kind}/{opt_name}"
            out["to_one_process"][key] = _max_diff(ours, reference)
            out["to_torch"][key] = _max_diff(ours, theirs)
            out["devices"][key] = sorted(devices)
            everyone = ours.new_empty(n_ranks * ours.numel())  # (N Psi,)
            dist.all_gather_into_tensor(everyone, ours, group=group)
            out["between_ranks"][key] = _max_diff(everyone.view(n_ranks, -1), ours)
        # Gradient accumulation: 3 micro-batches per rank, only the last one syncs.
        for kind in ("bucketed-600", "torch"):
            acc, _ = train_ddp(kind, opt_name, group, device, micro=3)
            key = f"{kind}+no_sync/{opt_name}"
            out["to_one_process"][key] = _max_diff(acc, reference)
            out["to_torch"][key] = _max_diff(acc, theirs)
    out["sent"] = {}
    rank = dist.get_rank(group)
    x, y = _batches(device)[0]
    for cls in (NaiveDDP, BucketedDDP):
        ddp = cls(mlp(WIDTHS, device=device), group)
        out_ = ddp(rank_share(x, rank, n_ranks))
        nn.functional.mse_loss(out_, rank_share(y, rank, n_ranks)).backward()
        if cls is NaiveDDP:
            ddp.sync_gradients()
        out["sent"][cls.__name__] = ddp.comm.paper_elements()
    return out


def _train_zero(stage, group, device, micro=1):
    rank, n_ranks = dist.get_rank(group), dist.get_world_size(group)
    model = mlp(ZERO_WIDTHS, seed=rank, device=device)  # the broadcast fixes it
    zero = STAGES[stage](model, group, **ADAMW)
    data = regression_batches(STEPS, BATCH, ZERO_WIDTHS[0], ZERO_WIDTHS[-1])
    for x, y in data:
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        for xm, ym in zip(x.chunk(micro), y.chunk(micro), strict=True):
            loss = nn.functional.mse_loss(model(xm.to(device)), ym.to(device))
            (loss / micro).backward()
        zero.step()
        zero.zero_grad()
    devices = {str(t.device) for u in zero.units for t in (u.data, u.grad)}
    states = [t for s in zero.optimizer.state.values() for t in s.values()]
    devices |= {str(t.device) for t in [zero.master, *states] if t.dim() > 0}
    return _flat(zero.full_parameters()), zero, devices


def zero_checks(group: dist.ProcessGroup | None) -> dict:
    """ZeRO stages 1-3 against single-process AdamW; units; bytes and traffic."""
    device = rank_device(group)
    data = regression_batches(STEPS, BATCH, ZERO_WIDTHS[0], ZERO_WIDTHS[-1])
    reference = mlp(ZERO_WIDTHS, device=device)
    optimizer = torch.optim.AdamW(reference.parameters(), **ADAMW)
    for x, y in data:
        nn.functional.mse_loss(reference(x.to(device)), y.to(device)).backward()
        optimizer.step()
        optimizer.zero_grad()
    expected = _flat(reference.parameters())
    out = {"to_one_process": {}, "devices": {}, "units": None}
    for stage in STAGES:
        ours, zero, devices = _train_zero(stage, group, device)
        out["to_one_process"][str(stage)] = _max_diff(ours, expected)
        out["devices"][str(stage)] = sorted(devices)
        out["units"] = [(u.numel, u.padded_numel, u.shard_numel) for u in zero.units]
        if stage > 1:  # gradient accumulation: 3 micro-batches before each step
            ours, _, _ = _train_zero(stage, group, device, micro=3)
            out["to_one_process"][f"{stage}+accumulation"] = _max_diff(ours, expected)
    out["memory"] = measure_stages(MEMORY_WIDTHS, group)
    return out


def _errors(call) -> str | None:
    try:
        call()
    except ValueError as e:
        return str(e)
    return None


def bad_group_errors() -> dict:
    """On 4 ranks: a group without this rank; replicas that differ (every rank)."""
    rank = dist.get_rank()
    errors = {}
    only_rank0 = dist.new_group([0])  # every rank must call new_group
    errors["not_a_member"] = _errors(lambda: NaiveDDP(mlp(WIDTHS), group=only_rank0))
    model = mlp(WIDTHS) if rank == 0 else nn.Linear(6, 3)
    for cls in (NaiveDDP, BucketedDDP):
        errors[f"mismatch/{cls.__name__}"] = _errors(lambda cls=cls: cls(model))
    return errors


def gloo_checks() -> dict:
    """Run on 4 gloo ranks: every check, on the world and on this rank's pair."""
    pairs = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    out = {}
    for name, group in (("world", None), ("pair", pairs[dist.get_rank() % 2])):
        out[name] = {"ddp": ddp_checks(group), "zero": zero_checks(group)}
    out["errors"] = bad_group_errors()
    return out


def accelerator_checks() -> dict:
    """Run on the NCCL ranks: the same checks on the world only."""
    return {"world": {"ddp": ddp_checks(None), "zero": zero_checks(None)}}


def gloo_results() -> list[dict]:
    """:func:`gloo_checks` on 4 spawned gloo ranks, once per test session."""
    return shared_results(gloo_checks, 4, timeout=300)


@functools.cache
def nccl_results(world_size: int) -> list[dict]:
    """:func:`accelerator_checks` on ``world_size`` NCCL ranks (one GPU each)."""
    return run_distributed(accelerator_checks, world_size, backend="nccl", timeout=300)
