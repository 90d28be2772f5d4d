"""Building blocks of every collective here: a paired send/receive and a reduction.

A collective algorithm is a schedule of point-to-point messages plus local arithmetic.
:func:`sendrecv` is MPI's ``MPI_Sendrecv``: post a send and a receive together and
wait for both, so that two ranks exchanging with each other cannot deadlock (two
blocking sends facing each other can, once messages outgrow the transport's buffers).
It goes through ``dist.batch_isend_irecv``, which NCCL runs as one fused group (torch
asks that the first such call in a group involve all its ranks: the consistency check
of the public functions, on by default, is one); on gloo, which runs each transfer on
its own, it calls the process group's ``send`` and ``recv`` directly. The
reduction operators are the four of MPI and ``dist.ReduceOp`` that are associative and
commutative on every dtype: sum, prod, max and min. Ranks are *group* ranks
throughout: rank r of ``group`` is passed to torch as ``group_dst``/``group_src``, so
the same code runs on the world and on any sub-group.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

# The elementwise functions behind each op; each has an exact integer version, so an
# int reduction is exact whatever order the ranks combine in.
REDUCE_FNS = {
    "sum": torch.add,
    "prod": torch.mul,
    "max": torch.maximum,
    "min": torch.minimum,
}


def combine_(acc: Tensor, other: Tensor, op: str) -> Tensor:
    """Reduce ``other`` into ``acc`` in place: ``acc = acc (op) other``.

    Args:
        acc: the running result; overwritten.
        other: a tensor of the same shape and dtype as ``acc``.
        op: one of ``"sum"``, ``"prod"``, ``"max"``, ``"min"``.

    Returns:
        ``acc``, for chaining.
    """
    return REDUCE_FNS[op](acc, other, out=acc)


def isendrecv(
    send: Tensor,
    dst: int,
    recv: Tensor,
    src: int,
    group: dist.ProcessGroup | None = None,
) -> list[dist.Work]:
    """Post the send of ``send`` to ``dst`` and the receive of ``recv`` from ``src``.

    The non-blocking half of :func:`sendrecv`: returns at once with the handles to
    wait on; until they are done, ``send`` must not be written nor ``recv`` read. An
    empty tensor is not sent: both ends know every message length from the same size
    arithmetic, so the receiver skips it too.

    Args:
        send: contiguous tensor to send.
        dst: group rank that receives ``send``.
        recv: contiguous tensor to fill; same dtype as the sender's tensor.
        src: group rank whose tensor lands in ``recv``.
        group: process group; ``None`` means the default (world) group.

    Returns:
        The work handles (none when both tensors are empty).
    """
    if dist.get_backend(group) == "gloo":
        return _gloo_isendrecv(send, dst, recv, src, group)
    # region paired-send-receive
    ops = []
    if send.numel() > 0:
        ops.append(dist.P2POp(dist.isend, send, group=group, group_peer=dst))
    if recv.numel() > 0:
        ops.append(dist.P2POp(dist.irecv, recv, group=group, group_peer=src))
    return dist.batch_isend_irecv(ops) if ops else []
    # endregion


def _gloo_isendrecv(
    send: Tensor, dst: int, recv: Tensor, src: int, group: dist.ProcessGroup | None
) -> list[dist.Work]:
    """:func:`isendrecv` on gloo, through the process group's own send and receive.

    gloo runs every transfer on its own, so there is nothing to batch, and calling
    the process group directly skips the checks ``torch.distributed`` repeats in
    Python on every call: with a few large messages per collective that per-call
    cost is what separates a Python ring from gloo's C++ one (see bandwidth.rst).
    Ranks are the group's, as the process group's methods expect.
    """
    pg = group if group is not None else dist.group.WORLD
    work = []
    if send.numel() > 0:
        work.append(pg.send([send], dst, 0))
    if recv.numel() > 0:
        work.append(pg.recv([recv], src, 0))
    return work


def sendrecv(
    send: Tensor,
    dst: int,
    recv: Tensor,
    src: int,
    group: dist.ProcessGroup | None = None,
) -> None:
    """Send ``send`` to rank ``dst`` while receiving ``recv`` from rank ``src``.

    Both transfers are in flight at once (:func:`isendrecv`) and the call returns
    when both are done, so ``send`` may be overwritten and ``recv`` read right after.
    Arguments as :func:`isendrecv`.
    """
    for work in isendrecv(send, dst, recv, src, group):
        work.wait()
