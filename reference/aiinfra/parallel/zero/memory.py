"""ZeRO measured: model-state bytes and traffic per rank against the paper's formulas.

Every rank builds the same model in the paper's mixed precision (bf16 parameters and
gradients, fp32 master copy and Adam moments: K_opt = 12), takes one step with each
stage and reports (a) the bytes of the storages it holds afterwards, part by part, and
(b) the elements its collectives moved during the step. ZeRO's formulas (Rajbhandari et
al. 2020, Fig. 1 and Sec. 7) count Psi parameters shared exactly by N_d ranks; our flat
units pad each Psi_u up to N_d Psi_{s,u}, so the measurement equals the formula
evaluated at Psi_pad = sum_u N_d Psi_{s,u}, which exceeds Psi by at most (N_d - 1)
elements per unit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import asdict

import torch
import torch.distributed as dist
from torch import nn

from aiinfra.distributed import rank_device, run_distributed
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.parallel.toy import mlp, rank_share, regression_batches
from aiinfra.parallel.zero.compare import STAGES
from aiinfra.report import Table

MEMORY_WIDTHS = (64, 257, 129, 11)  # Psi = 51,417 in 3 units, none divisible by 4
PAPER_TRAFFIC = {1: 2, 2: 2, 3: 3}  # elements per rank per step, in units of Psi


def zero_traffic(stage: int, micro_batches: int = 1) -> int:
    """Elements each rank sends per optimizer step, in units of Psi (paper's count).

    With k micro-batches (gradient accumulation), DDP under ``no_sync`` and stage 1
    reduce once, at the last micro-batch: 2 Psi. Stage 2 keeps only a gradient
    shard, so it must reduce-scatter every micro-batch's gradients (k Psi) before
    the step's all-gather (Psi). Stage 3 also gathers the parameters twice per
    micro-batch: 3 k Psi.

    Args:
        stage: 0 (DDP) to 3.
        micro_batches: k, backward passes per optimizer step.

    Returns:
        The multiple of Psi: 2, 2, k + 1 and 3 k for stages 0 to 3.

    Raises:
        ValueError: ``stage`` is not 0-3 or ``micro_batches`` is not positive.
    """
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    k = micro_batches
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"micro_batches must be a positive integer, got {k!r}")
    # region traffic
    if stage <= 1:
        psi_units = 2  # one all-reduce (or reduce-scatter + all-gather) at the step
    elif stage == 2:
        psi_units = k + 1  # a reduce-scatter per micro-batch, one all-gather
    else:
        psi_units = 3 * k  # two all-gathers and a reduce-scatter per micro-batch
    # endregion
    return psi_units


def traffic_table(ks: Sequence[int] = (1, 4, 16)) -> Table:
    """Elements per rank per step, in units of Psi, for k micro-batches.

    Args:
        ks: the micro-batch counts, one column each.

    Returns:
        One row per stage 0 (DDP) to 3.

    Raises:
        ValueError: a count is not a positive integer.
    """
    names = ["DDP (no_sync)", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    rows = [[names[stage], *(zero_traffic(stage, k) for k in ks)] for stage in range(4)]
    return Table(
        ["stage", *(f"k = {k}" for k in ks)],
        rows,
        note="Elements sent per rank per optimizer step, in units of Psi (the "
        "paper's count; a ring sends (N_d-1)/N_d of it); k micro-batches per step.",
    )


def measure_stage(
    stage: int, widths: Sequence[int], group: dist.ProcessGroup | None = None
) -> dict:
    """Run on every rank: one bf16 step of ZeRO ``stage``; bytes held, elements sent.

    Args:
        stage: 1, 2 or 3.
        widths: the toy model's layer widths.
        group: the data-parallel group (``None``: the world); the model and the
            batch live on :func:`~aiinfra.distributed.rank_device` of it.

    Returns:
        ``stage``, ``world_size``, ``backend``, ``psi``, ``psi_padded``,
        ``bytes`` (params, grads, optimizer), and the step's ``paper_elements``
        and ``ring_elements`` per rank.
    """
    device = rank_device(group)  # the rank's GPU under NCCL, the CPU under gloo
    model = mlp(widths, device=device)
    zero = STAGES[stage](model, group, param_dtype=torch.bfloat16)
    rank, n_ranks = zero.comm.rank, zero.comm.world_size
    x, y = regression_batches(1, 2 * n_ranks, widths[0], widths[-1])[0]
    x, y = x.to(device), y.to(device)  # (2 N, d_in), (2 N, d_out)
    zero.comm.reset()  # count the step only, not the set-up broadcasts
    out = model(rank_share(x, rank, n_ranks).bfloat16())  # (B / N, d_out)
    loss = nn.functional.mse_loss(out.float(), rank_share(y, rank, n_ranks))
    loss.backward()
    zero.step()
    zero.zero_grad()
    return {
        "stage": stage,
        "world_size": n_ranks,
        "backend": dist.get_backend(zero.comm.group),
        "psi": sum(u.numel for u in zero.units),
        "psi_padded": sum(u.padded_numel for u in zero.units),
        "bytes": asdict(zero.model_state_bytes()),
        "paper_elements": zero.comm.paper_elements(),
        "ring_elements": zero.comm.ring_elements(),
    }


def measure_stages(
    widths: Sequence[int], group: dist.ProcessGroup | None = None
) -> list[dict]:
    """Run on every rank: :func:`measure_stage` for stages 1, 2 and 3."""
    return [measure_stage(stage, widths, group) for stage in STAGES]


@functools.cache
def measure_zero(
    world_size: int = 4, widths: tuple[int, ...] = MEMORY_WIDTHS
) -> list[dict]:
    """Rank 0's :func:`measure_stages` on ``world_size`` spawned gloo ranks (cached).

    Raises:
        ValueError: ``world_size`` < 1 (from :func:`run_distributed`).
    """
    return run_distributed(measure_stages, world_size, widths, timeout=180)[0]


def memory_table(measurements: list[dict]) -> Table:
    """Measured bytes and traffic per rank beside the paper's formulas.

    Args:
        measurements: the output of :func:`measure_stages` (or :func:`measure_zero`).
    """
    rows = []
    for m in measurements:
        stage, psi, padded = m["stage"], m["psi"], m["psi_padded"]
        world_size, backend = m["world_size"], m["backend"]
        measured = sum(m["bytes"].values())
        rows.append(
            [
                stage,
                m["bytes"]["params"],
                m["bytes"]["grads"],
                m["bytes"]["optimizer"],
                measured,
                round(zero_model_states_bytes(psi, stage, world_size).total),
                round(zero_model_states_bytes(padded, stage, world_size).total),
                m["paper_elements"] / padded,
                PAPER_TRAFFIC[stage],
            ]
        )
    return Table(
        [
            "stage",
            "params (B)",
            "grads (B)",
            "optimizer (B)",
            "measured (B)",
            "formula at Psi (B)",
            "formula at Psi_pad (B)",
            "sent / Psi_pad",
            "paper: sent / Psi",
        ],
        rows,
        note="Bytes per rank (B = bytes); bf16 parameters and gradients, fp32 master "
        "copy and Adam moments (K_opt = 12), counted from tensor storages after one "
        "step. Sent: elements per rank per step, in the paper's convention.",
        stamp="N_d = {world} {backend} ranks, Psi = {psi}, Psi_pad = {padded}",
        fields={
            "world": world_size,
            "backend": backend,
            "psi": f"{psi:,}",
            "padded": f"{padded:,}",
        },
    )
