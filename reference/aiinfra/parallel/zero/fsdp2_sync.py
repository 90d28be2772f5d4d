"""What FSDP2's accumulation settings send: counted in a run, and the formula.

FSDP2 (``fully_shard``; Zhao et al. 2023) shards like ZeRO stage 3: each module's
parameters are all-gathered before its forward and again before its backward (when
``reshard_after_forward=True`` freed them), and its gradients are reduce-scattered
after backward. With ``k`` micro-batches per optimizer step, three switches decide
how much of that repeats (PyTorch's ``FSDPModule`` API):

- ``set_requires_gradient_sync(False)`` on all but the last micro-batch skips only
  the reduce-scatter (FSDP1's ``no_sync``): the gathers still run, ``(2k + 1) Psi``.
- ``reshard_after_forward=False`` keeps the parameters gathered from forward to
  backward: one gather per micro-batch, ``(k + 1) Psi``.
- ``set_reshard_after_backward(False)`` as well keeps them gathered between
  micro-batches: one gather and one reduce-scatter per step, ``2 Psi``, DDP's
  traffic at DDP's memory for parameters and gradients.

In the paper's convention (ZeRO, Sec. 7): an all-gather or a reduce-scatter of the
``Psi`` elements counts ``Psi``. :func:`count_fsdp2_traffic` runs ``fully_shard`` on
spawned gloo ranks with each setting and counts the elements of every all-gather
and reduce-scatter FSDP2 issues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch.distributed as dist
from torch import Tensor, nn

from aiinfra import checks
from aiinfra.distributed import run_distributed
from aiinfra.parallel.toy import mlp, regression_batches

#: The settings, by name: (requires_gradient_sync on every micro-batch,
#: reshard_after_forward, reshard_after_backward between micro-batches).
FSDP2_SETTINGS: dict[str, tuple[bool, bool, bool]] = {
    "sync every micro-batch": (True, True, True),
    "set_requires_gradient_sync(False)": (False, True, True),
    "reshard_after_forward=False": (False, False, True),
    "set_reshard_after_backward(False)": (False, False, False),
}
WIDTHS = (6, 8, 8, 3)  # 155 parameters in three fully_shard units


def fsdp2_traffic(setting: str, micro_batches: int) -> int:
    """Elements each rank sends per optimizer step, in units of Psi.

    Args:
        setting: a name of :data:`FSDP2_SETTINGS`.
        micro_batches: k, forward-backward passes per optimizer step.

    Returns:
        ``3k``, ``2k + 1``, ``k + 1`` or ``2``, in the order of the settings.

    Raises:
        ValueError: an unknown setting or a non-positive ``micro_batches``.
    """
    sync, after_forward, after_backward = FSDP2_SETTINGS[
        checks.one_of("setting", setting, list(FSDP2_SETTINGS))
    ]
    k = checks.positive_int("micro_batches", micro_batches)
    reduce_scatters = k if sync else 1
    if after_forward:
        gathers = 2 * k  # before each forward and each backward
    elif after_backward:
        gathers = k  # before each forward; backward reuses them
    else:
        gathers = 1  # once; kept until the step
    return gathers + reduce_scatters


def padded_psi(model: nn.Module, n_ranks: int) -> int:
    """Psi with each parameter's dim 0 padded to a multiple of ``n_ranks`` (FSDP2)."""
    total = 0
    for p in model.parameters():
        rows = -(-p.shape[0] // n_ranks) * n_ranks
        total += rows * (p.numel() // p.shape[0])
    return total


def _rank_counts(micro_batches: int) -> dict[str, float]:
    """On every rank: FSDP2's elements sent per step / Psi, for each setting."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    sent = [0]
    gather, scatter = dist.all_gather_single, dist.reduce_scatter_single

    def counted_gather(output: Tensor, input: Tensor, *args: Any, **kw: Any) -> Any:  # noqa: A002
        sent[0] += output.numel()  # the gathered Psi elements
        return gather(output, input, *args, **kw)

    def counted_scatter(output: Tensor, input: Tensor, *args: Any, **kw: Any) -> Any:  # noqa: A002
        sent[0] += input.numel()  # the Psi elements reduced
        return scatter(output, input, *args, **kw)

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    batches = regression_batches(micro_batches, 8, WIDTHS[0], WIDTHS[-1])
    out = {}
    dist.all_gather_single, dist.reduce_scatter_single = counted_gather, counted_scatter
    try:
        for name, (sync, after_forward, after_backward) in FSDP2_SETTINGS.items():
            model = mlp(WIDTHS)
            psi = padded_psi(model, dist.get_world_size())
            for layer in model:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer, mesh=mesh, reshard_after_forward=after_forward)
            fully_shard(model, mesh=mesh, reshard_after_forward=after_forward)
            sent[0] = 0
            for i, (x, y) in enumerate(batches):
                last = i == micro_batches - 1
                model.set_requires_gradient_sync(sync or last)
                model.set_reshard_after_backward(after_backward or last)
                nn.functional.mse_loss(model(x), y).backward()
            out[name] = sent[0] / psi
    finally:
        dist.all_gather_single, dist.reduce_scatter_single = gather, scatter
    return out


def count_fsdp2_traffic(
    micro_batches: int = 3, world_size: int = 2, timeout: float = 120.0
) -> dict[str, float]:
    """FSDP2's elements sent per rank and step / Psi for each setting, measured.

    Args:
        micro_batches: k.
        world_size: gloo ranks.
        timeout: seconds for the spawned run.

    Returns:
        Rank 0's multiple of Psi, by setting name.

    Raises:
        ValueError: ``micro_batches`` or ``world_size`` is not positive.
    """
    checks.positive_int("micro_batches", micro_batches)
    checks.positive_int("world_size", world_size)
    return run_distributed(_rank_counts, world_size, micro_batches, timeout=timeout)[0]


def fsdp2_traffic_rows(
    ks: Sequence[int] = (1, 4, 16),
) -> list[list[object]]:
    """One row per setting: its name and its multiple of Psi for each ``k``."""
    return [[name, *(fsdp2_traffic(name, k) for k in ks)] for name in FSDP2_SETTINGS]
