"""Input checks shared by the collectives: reject bad arguments before any message.

A rank that raises halfway through a collective leaves its peers waiting forever, so
every public function first checks, locally, what one rank can see: types, dtypes,
sizes, the op, a root rank, membership of the group. What only the group can see (that
all ranks passed the same size, dtype, op and root) is checked by
:func:`check_same_on_all_ranks`: a tiny exchange of a few integers, after which every
rank inspects the same table and so raises the same ``ValueError`` instead of hanging.
It costs one round of p - 1 small messages per rank; benchmarks turn it off with
``check_consistency=False``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from aiinfra import checks
from aiinfra.comm.primitives import REDUCE_FNS

# Dtypes that gloo and NCCL can send and that have an exact elementwise sum, product,
# max and min (bool and complex do not).
SUPPORTED_DTYPES = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.uint8,
    torch.int8,
    torch.int32,
    torch.int64,
)
OP_NAMES = tuple(REDUCE_FNS)  # ("sum", "prod", "max", "min")
_DIST_OPS = (
    (dist.ReduceOp.SUM, "sum"),
    (dist.ReduceOp.PRODUCT, "prod"),
    (dist.ReduceOp.MAX, "max"),
    (dist.ReduceOp.MIN, "min"),
)


def resolve_op(op: Any) -> str:
    """Return the name of a supported reduction, given a name or a ``dist.ReduceOp``.

    Raises:
        ValueError: ``op`` is not sum, prod, max or min (e.g. AVG or BAND).
    """
    if isinstance(op, str) and op in REDUCE_FNS:
        return op
    if isinstance(op, dist.ReduceOp | dist.ReduceOp.RedOpType):
        for dist_op, name in _DIST_OPS:
            if op == dist_op:
                return name
    raise ValueError(
        f"op must be one of {OP_NAMES} or the matching dist.ReduceOp, got {op!r}"
    )


def check_tensor(tensor: Any, name: str) -> None:
    """Check that ``tensor`` is a non-empty contiguous tensor of a supported dtype.

    Raises:
        TypeError: not a tensor, or a dtype outside ``SUPPORTED_DTYPES``.
        ValueError: empty, or not contiguous.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{name}.dtype must be one of {SUPPORTED_DTYPES}, got {tensor.dtype}"
        )
    if tensor.numel() == 0:
        raise ValueError(f"{name} must not be empty (numel() == 0)")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (see Tensor.is_contiguous)")


def group_rank_and_size(group: dist.ProcessGroup | None) -> tuple[int, int]:
    """Return this rank's rank in ``group`` and the size of ``group``.

    Raises:
        ValueError: this process is not a member of ``group``.
    """
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError(
            f"group: this process (global rank {dist.get_rank()}) is not a member "
            "of group; only members may call a collective on it"
        )
    return rank, dist.get_world_size(group)


def check_root(root: Any, name: str, p: int) -> None:
    """Check that a root rank (``src``, ``dst``) is a group rank in ``[0, p)``.

    Raises:
        ValueError: not an int, or outside ``[0, p)``.
    """
    checks.int_in(name, root, 0, p - 1)


def _encode(value: int | str | torch.dtype) -> int:
    if isinstance(value, torch.dtype):
        return SUPPORTED_DTYPES.index(value)
    if isinstance(value, str):
        return OP_NAMES.index(value)
    return int(value)


def _decode(like: int | str | torch.dtype, code: int) -> int | str | torch.dtype:
    if isinstance(like, torch.dtype):
        return SUPPORTED_DTYPES[code]
    if isinstance(like, str):
        return OP_NAMES[code]
    return code


def check_same_on_all_ranks(
    fields: dict[str, int | str | torch.dtype],
    group: dist.ProcessGroup | None,
    device: torch.device,
) -> None:
    """Check that every rank of ``group`` passed the same ``fields``.

    Each rank sends its k values to every other rank and receives theirs: afterwards
    all ranks hold the same (p, k) table, so all raise the same error, or none does.
    Every rank must call this with the same field names in the same order.

    Args:
        fields: name -> value, e.g. ``{"tensor.numel()": 7, "op": "sum"}``; values
            are ints, op names or supported dtypes.
        group: process group; ``None`` means the world.
        device: where the small exchange buffer lives (the data's device, so NCCL
            gets a GPU tensor and gloo a CPU one).

    Raises:
        ValueError: some field differs between ranks; the message lists its value on
            every rank.
    """
    rank, p = dist.get_rank(group), dist.get_world_size(group)
    if p == 1:
        return
    mine = torch.tensor([_encode(v) for v in fields.values()], device=device)  # (k,)
    table = mine.new_empty(p, len(fields))  # (p, k): row j holds rank j's values
    table[rank] = mine
    ops = []
    for peer in range(p):
        if peer != rank:
            ops.append(dist.P2POp(dist.isend, mine, group=group, group_peer=peer))
            ops.append(
                dist.P2POp(dist.irecv, table[peer], group=group, group_peer=peer)
            )
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    for j, (name, like) in enumerate(fields.items()):
        values = [_decode(like, code) for code in table[:, j].tolist()]
        if len(set(values)) > 1:
            raise ValueError(
                f"{name} differs across the ranks of the group: {values} (by group "
                "rank); every rank must pass the same value"
            )


def check_output_input(output: Any, input: Any) -> None:
    """Check an out-of-place collective's two buffers: tensors, same dtype.

    Raises:
        TypeError: either is not a tensor, has an unsupported dtype, or the two
            dtypes differ.
        ValueError: either is empty or non-contiguous.
    """
    check_tensor(output, "output")
    check_tensor(input, "input")
    if input.dtype != output.dtype:
        raise TypeError(f"input.dtype {input.dtype} != output.dtype {output.dtype}")


def check_disjoint(a: Tensor, a_name: str, b: Tensor, b_name: str) -> None:
    """Check that two tensors do not share memory.

    Raises:
        ValueError: ``a`` and ``b`` are views of the same storage.
    """
    if a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr():
        raise ValueError(f"{a_name} and {b_name} must not share memory")
