"""Collective matmul: a TP all-gather or reduce-scatter overlapped with its matmul.

Under sequence parallelism a column-parallel matmul waits for an all-gather of the
sequence shards, and a row-parallel one is followed by a reduce-scatter (Korthikanti
et al. 2022). Both decompose into ``p`` steps on a ring (Wang et al. 2023, "Overlap
communication with dependent computation via decomposition"): at each step a rank
multiplies the chunk it holds while sending it on, so each chunk's transfer overlaps
the previous chunk's matmul.

- :func:`all_gather_matmul`: rank ``r`` holds the shard ``X_r`` (T/p, h); at step
  ``s`` it holds ``X_{(r-s) mod p}``, computes its rows of ``X W^T`` and passes the
  shard to rank ``r + 1`` (``isend``/``irecv``) while it computes.
- :func:`matmul_reduce_scatter`: rank ``r`` holds ``X_r`` (T, h/p) and ``W_r``
  (n, h/p); at step ``s`` it computes its partial product for the rows of rank
  ``(r + s + 1) mod p``, adds the partial sum received from rank ``r + 1`` and
  sends the sum to rank ``r - 1``; after ``p`` steps it holds its own rows, summed
  over every rank.

Both are forward-only reference code on point-to-point operations (gloo runs them
on the CPU, where nothing overlaps: the two cores run both). :func:`exposed_seconds`
is the cost model of the overlap on a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra import checks
from aiinfra.comm.cost import LINKS, ring_all_gather_time

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _ring(x: Tensor, name: str) -> tuple[int, int, int]:
    """(p, rank, rows per chunk) of the default group, ``x``'s rows checked."""
    p, r = dist.get_world_size(), dist.get_rank()
    if x.dim() != 2:
        raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")
    return p, r, x.shape[0]


def all_gather_matmul(x_shard: Tensor, weight: Tensor) -> Tensor:
    """``all_gather(x_shard) @ weight.T`` in ``p`` overlapped steps.

    Args:
        x_shard: this rank's rows of X, (T/p, h).
        weight: this rank's column shard of W, (n/p, h).

    Returns:
        (T, n/p): every rank's rows times this rank's weight shard.

    Raises:
        ValueError: ``x_shard`` or ``weight`` is not 2-D, or their widths differ.
    """
    p, r, rows = _ring(x_shard, "x_shard")
    if weight.dim() != 2 or weight.shape[1] != x_shard.shape[1]:
        raise ValueError(
            f"weight must be (n, {x_shard.shape[1]}), got {tuple(weight.shape)}"
        )
    out = x_shard.new_empty(p * rows, weight.shape[0])  # (T, n/p)
    held = x_shard.contiguous()
    for step in range(p):
        owner = (r - step) % p  # whose shard this rank holds now
        if step < p - 1:  # pass it on while multiplying it
            incoming = torch.empty_like(held)
            sent = dist.isend(held, (r + 1) % p)
            received = dist.irecv(incoming, (r - 1) % p)
        out[owner * rows : (owner + 1) * rows] = held @ weight.T
        if step < p - 1:
            sent.wait()
            received.wait()
            held = incoming
    return out


def matmul_reduce_scatter(x: Tensor, weight: Tensor) -> Tensor:
    """``reduce_scatter(x @ weight.T)`` over rows, in ``p`` overlapped steps.

    Args:
        x: this rank's column shard of X, (T, h/p).
        weight: this rank's column shard of W, (n, h/p).

    Returns:
        (T/p, n): this rank's rows of the product summed over all ranks.

    Raises:
        ValueError: not 2-D, widths differ, or T is not divisible by p.
    """
    p, r, total_rows = _ring(x, "x")
    if weight.dim() != 2 or weight.shape[1] != x.shape[1]:
        raise ValueError(f"weight must be (n, {x.shape[1]}), got {tuple(weight.shape)}")
    if total_rows % p:
        raise ValueError(f"x's rows {total_rows} must be divisible by p = {p}")
    rows = total_rows // p
    pending = None
    for step in range(p):
        chunk = (r + step + 1) % p  # rows this step's partial sum is for
        partial = x[chunk * rows : (chunk + 1) * rows] @ weight.T  # (T/p, n)
        if pending is not None:  # the sum from rank r + 1 for the same rows
            sent, received, incoming = pending
            sent.wait()
            received.wait()
            partial += incoming
        if step < p - 1:
            incoming = torch.empty_like(partial)
            pending = (
                dist.isend(partial, (r - 1) % p),
                dist.irecv(incoming, (r + 1) % p),
                incoming,
            )
    return partial


def exposed_seconds(compute: float, transfer: float, chunks: int) -> float:
    """Communication left exposed when a transfer is split into overlapped chunks.

    A pipeline of ``k`` chunks: chunk ``i``'s transfer overlaps chunk ``i - 1``'s
    matmul. The first transfer cannot overlap anything, and each later step lasts
    the longer of the two, so the exposed time is
    ``m + (k - 1) max(0, m - c)`` with ``c = compute / k`` and ``m`` the transfer
    time of one chunk. ``k = 1`` is the plain collective, all exposed.

    Args:
        compute: seconds of the whole matmul.
        transfer: seconds of the whole transfer; one chunk takes
            ``transfer / chunks`` (:func:`chunked_all_gather_exposed` adds the
            latency each chunk pays).
        chunks: k >= 1.

    Raises:
        ValueError: a negative time or ``chunks`` < 1.
    """
    checks.non_negative("compute", compute)
    checks.non_negative("transfer", transfer)
    k = checks.positive_int("chunks", chunks)
    c, m = compute / k, transfer / k
    return m + (k - 1) * max(0.0, m - c)


def chunked_all_gather_exposed(
    n_bytes: float, p: int, compute: float, chunks: int, link: str
) -> float:
    """Exposed seconds of an all-gather of ``n_bytes`` split into ``chunks``.

    Each chunk is a ring all-gather of ``n_bytes / chunks`` on ``link`` (the
    alpha-beta model of :mod:`aiinfra.comm.cost`: every chunk pays the ring's
    ``(p - 1) alpha`` again), overlapped with ``compute / chunks`` of the matmul
    as in :func:`exposed_seconds`.

    Args:
        n_bytes: the gathered buffer's bytes (``b T h`` elements).
        p: ranks of the tensor-parallel group.
        compute: seconds of the matmul that consumes it.
        chunks: k >= 1.
        link: a link of :data:`~aiinfra.comm.cost.LINKS`.
    """
    k = checks.positive_int("chunks", chunks)
    checks.one_of("link", link, sorted(LINKS))
    per_chunk = ring_all_gather_time(n_bytes / k, p, link)
    return exposed_seconds(compute, per_chunk * k, k)


def exposed_figure(
    n_bytes: float,
    p: int,
    compute: float,
    links: Sequence[str],
    chunks: Sequence[int],
    fs: float = 8,
) -> Figure:
    """Exposed communication against chunk count, one line per link: cost model.

    Args:
        n_bytes: the gathered buffer's bytes.
        p: ranks of the tensor-parallel group.
        compute: seconds of the matmul that consumes it.
        links: names in :data:`~aiinfra.comm.cost.LINKS`.
        chunks: chunk counts, the x axis.
        fs: base font size, points.
    """
    from matplotlib.figure import Figure

    from aiinfra.parallel.tensor.figures import _LINK_NAMES

    fig = Figure(figsize=(6.4, 3.4), layout="constrained")
    ax = fig.subplots()
    for link, style in zip(links, ("o-", "s-", "^-", "v-"), strict=False):
        us = [
            chunked_all_gather_exposed(n_bytes, p, compute, k, link) * 1e6
            for k in chunks
        ]
        name = f"{_LINK_NAMES.get(link, link)} ({1 / LINKS[link].beta / 1e9:.0f} GB/s)"
        ax.plot(chunks, us, style, label=name, markersize=4)
    ax.axhline(compute * 1e6, color="gray", ls="--", label="the matmul alone")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("chunks", fontsize=fs)
    ax.set_ylabel("exposed communication (us)", fontsize=fs)
    ax.tick_params(labelsize=fs)
    ax.legend(fontsize=fs)
    return fig
