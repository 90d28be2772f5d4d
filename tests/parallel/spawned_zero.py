"""The ZeRO side of the shared spawn (:mod:`spawned`): stages 1-3 on each rank.

:func:`zero_checks` runs in the 4-rank gloo spawn of ``test_ddp`` and ``test_zero``
(on the world and on the pairs) and on the NCCL ranks of ``test_nccl``: the stages
against single-process AdamW, with gradient accumulation, with clipping and
undecayed biases, ZeRO-3 with prefetching, and the measured bytes and traffic.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.parallel.zero.compare import (
    ADAMW,
    MAX_GRAD_NORM,
    RECIPE,
    STAGES,
    WIDTHS,
    adamw_groups,
)
from aiinfra.parallel.zero.memory import MEMORY_WIDTHS, measure_stages
from torch import nn

STEPS = 5
BATCH = 24  # divisible by 2 and 4 ranks, and by 3 micro-batches per rank


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def flat(params) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in params])


def _train_zero(stage, group, device, micro=1, config=ADAMW):
    rank, n_ranks = dist.get_rank(group), dist.get_world_size(group)
    model = mlp(WIDTHS, seed=rank, device=device)  # the broadcast fixes it
    zero = STAGES[stage](model, group, **config)
    data = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    zero.norms = []  # the global gradient norm of each step, if clipping
    for x, y in data:
        x, y = rank_share(x, rank, n_ranks), rank_share(y, rank, n_ranks)
        for xm, ym in zip(x.chunk(micro), y.chunk(micro), strict=True):
            loss = nn.functional.mse_loss(model(xm.to(device)), ym.to(device))
            (loss / micro).backward()
        norm = zero.step()
        if norm is not None:
            zero.norms.append(norm.item())
        zero.zero_grad()
    devices = {str(t.device) for u in zero.units for t in (u.data, u.grad)}
    states = [t for s in zero.optimizer.state.values() for t in s.values()]
    devices |= {str(t.device) for t in [zero.master, *states] if t.dim() > 0}
    zero.sent = zero.comm.paper_elements()  # the steps' traffic, before the gather
    return flat(zero.full_parameters()), zero, devices


def zero_checks(group: dist.ProcessGroup | None) -> dict:
    """ZeRO stages 1-3 against single-process AdamW; units; bytes and traffic."""
    device = rank_device(group)
    data = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    reference = mlp(WIDTHS, device=device)
    optimizer = torch.optim.AdamW(reference.parameters(), **ADAMW)
    for x, y in data:
        nn.functional.mse_loss(reference(x.to(device)), y.to(device)).backward()
        optimizer.step()
        optimizer.zero_grad()
    expected = flat(reference.parameters())
    out = {"to_one_process": {}, "devices": {}, "units": None}
    out["traffic"] = {}  # elements per rank per step / Psi_pad, k micro-batches
    zero3 = {}  # k -> stage 3's parameters: the ground truth of its variants
    for stage in STAGES:
        ours, zero, devices = _train_zero(stage, group, device)
        zero3[1] = ours
        out["to_one_process"][str(stage)] = max_diff(ours, expected)
        out["devices"][str(stage)] = sorted(devices)
        out["units"] = [(u.numel, u.padded_numel, u.shard_numel) for u in zero.units]
        padded = sum(u.padded_numel for u in zero.units)
        out["traffic"][f"{stage}/k=1"] = zero.sent / STEPS / padded
        # Gradient accumulation: 3 micro-batches before each step.
        ours, zero, _ = _train_zero(stage, group, device, micro=3)
        zero3[3] = ours
        out["to_one_process"][f"{stage}+accumulation"] = max_diff(ours, expected)
        out["traffic"][f"{stage}/k=3"] = zero.sent / STEPS / padded
    out["memory"] = measure_stages(MEMORY_WIDTHS, group)
    out["clip"] = zero_clip_checks(group, device)
    out["prefetch"] = zero_prefetch_checks(group, device, zero3)
    return out


def zero_clip_checks(group, device) -> dict:
    """Clipping and no-decay biases against one process: AdamW, 2 groups, clip."""
    data = regression_batches(STEPS, BATCH, WIDTHS[0], WIDTHS[-1])
    reference = mlp(WIDTHS, device=device)
    optimizer = adamw_groups(reference)
    out = {"max_norm": MAX_GRAD_NORM, "reference_norms": [], "diff": {}, "norms": {}}
    for x, y in data:
        nn.functional.mse_loss(reference(x.to(device)), y.to(device)).backward()
        norm = nn.utils.clip_grad_norm_(reference.parameters(), MAX_GRAD_NORM)
        out["reference_norms"].append(norm.item())
        optimizer.step()
        optimizer.zero_grad()
    expected = flat(reference.parameters())
    for stage in STAGES:
        ours, zero, _ = _train_zero(stage, group, device, config=RECIPE)
        out["diff"][str(stage)] = max_diff(ours, expected)
        out["norms"][str(stage)] = zero.norms
    return out


ZERO3_VARIANTS = [  # (Zero3 options, micro-batches k)
    ({"prefetch": 2}, 1),
    ({"prefetch": 1, "reshard_after_forward": False}, 1),
    ({"prefetch": 1, "reshard_after_forward": False}, 3),
]


def zero_prefetch_checks(group, device, sync: dict) -> dict:
    """ZeRO-3 with prefetch / no reshard against the synchronous stage 3 (``sync``:
    its parameters after the same steps with k micro-batches)."""
    out = {}
    for options, micro in ZERO3_VARIANTS:
        ours, zero, _ = _train_zero(3, group, device, micro, ADAMW | options)
        padded = sum(u.padded_numel for u in zero.units)
        out[f"{options}/k={micro}"] = {
            "prefetch": options["prefetch"],
            "reshard": options.get("reshard_after_forward", True),
            "k": micro,
            "diff": max_diff(ours, sync[micro]),
            "traffic": zero.sent / STEPS / padded,
            "peak_in_flight": zero.peak_in_flight,
        }
    return out
