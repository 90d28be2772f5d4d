"""Gradient clipping and weight-decay groups when the optimizer sees only flat shards.

AdamW acts element by element, so ZeRO can update a flat shard as if it were the
parameters it came from. Two parts of the usual training recipe are not element-wise.
Clipping by the global norm (Pascanu et al. 2013) scales every gradient by
min(1, g_max / (norm + 1e-6)), and the norm spans all ranks' shards: each rank sums the
squares of its shard, one scalar all-reduce adds the N_d partial sums, and every rank
scales its own shard (the padding is zero and adds nothing; stage 1 keeps a full
gradient but counts only its reduced shard, so each element is counted once).
Weight decay skips biases and norm gains (parameters with fewer than two
dimensions) in most recipes (e.g. nanoGPT's ``configure_optimizers``); on a flat
shard such a group is a set of element ranges, recorded once as a boolean mask from
the units' layouts (one byte per shard element, against K_opt = 12 of optimizer state).
Notation as in :mod:`aiinfra.parallel.zero.stage1`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from aiinfra.comm.counter import CommCounter
    from aiinfra.parallel.zero.flat import FlatUnit

CLIP_EPS = 1e-6  # added to the norm, as torch.nn.utils.clip_grad_norm_ does


def _check_max_norm(name: str, value: float | None) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if value is not None and not (ok and 0 < value < math.inf):
        raise ValueError(f"{name} must be None or a finite number > 0, got {value!r}")


def check_clip_and_decay(max_grad_norm: float | None, no_decay_ndim: int) -> None:
    """Raise unless ``max_grad_norm`` is None or > 0 and ``no_decay_ndim`` an int >= 0.

    Raises:
        ValueError: either argument is out of range (named in the message).
    """
    _check_max_norm("max_grad_norm", max_grad_norm)
    if (
        isinstance(no_decay_ndim, bool)
        or not isinstance(no_decay_ndim, int)
        or no_decay_ndim < 0
    ):
        raise ValueError(f"no_decay_ndim must be an int >= 0, got {no_decay_ndim!r}")


def decay_groups(
    params: Sequence[nn.Parameter], no_decay_ndim: int = 2
) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """Split parameters into (decayed, not decayed): fewer than ``no_decay_ndim`` dims.

    The usual recipe's two AdamW parameter groups (``no_decay_ndim=2``: biases and
    norm gains undecayed); ``0`` decays everything.

    Raises:
        ValueError: ``no_decay_ndim`` is not an int >= 0.
    """
    check_clip_and_decay(None, no_decay_ndim)
    decay = [p for p in params if p.dim() >= no_decay_ndim]
    return decay, [p for p in params if p.dim() < no_decay_ndim]


def decay_mask(
    units: Sequence[FlatUnit], no_decay_ndim: int, device: torch.device
) -> torch.Tensor:
    """Which elements of the concatenated master shards get weight decay.

    Args:
        units: the flat units, in master order.
        no_decay_ndim: parameters with fewer dimensions get no decay.
        device: where the mask lives (the master's device).

    Returns:
        (sum_u Psi_s,) bool; padding elements are False (their gradient is zero anyway).

    Raises:
        ValueError: ``no_decay_ndim`` is not an int >= 0.
    """
    check_clip_and_decay(None, no_decay_ndim)
    shards = []
    # region mask
    for u in units:
        full = torch.zeros(u.padded_numel, dtype=torch.bool)  # (N_d Psi_s,)
        for view, shape in zip(u.views(full), u.shapes, strict=True):
            view.fill_(len(shape) >= no_decay_ndim)  # the parameter's elements
        shards.append(full[u.shard])  # (Psi_s,): this rank's elements
    # endregion
    return torch.cat(shards).to(device)  # (sum_u Psi_s,)


def clip_grad_norm_shards_(
    grad: torch.Tensor, max_norm: float, comm: CommCounter
) -> torch.Tensor:
    """Clip the global gradient norm, each rank holding one shard; a collective.

    Args:
        grad: this rank's (sum_u Psi_s,) fp32 gradient shards, scaled in place.
        max_norm: c, the largest norm allowed.
        comm: the data-parallel group's collectives.

    Returns:
        The norm of the whole gradient before clipping (a 0-dim tensor).

    Raises:
        ValueError: ``max_norm`` is not a finite number > 0 (before the collective).
    """
    if max_norm is None:
        raise ValueError("max_norm must be a finite number > 0, got None")
    _check_max_norm("max_norm", max_norm)
    # region clip
    norm_sq = grad.pow(2).sum()  # this shard's share of ||g||^2; padding adds 0
    comm.all_reduce(norm_sq)  # one scalar: the sum over the N shards
    total = norm_sq.sqrt()  # the global norm, the same on every rank
    scale = (max_norm / (total + CLIP_EPS)).clamp(max=1.0)
    grad.mul_(scale)  # every rank scales its own shard
    # endregion
    return total
