"""Matrix products of the attention kernels, counted from their source.

A kernel's FLOPs are its query-key pairs (:mod:`aiinfra.models.attention.flops`)
times ``2 d`` per matrix product it takes per pair. FlashAttention's forward pass
takes two, ``S = Q K^T`` and ``P V``. Its backward pass recomputes ``S`` and takes
four more, ``dV``, ``dP = dO V^T``, ``dQ`` and ``dK``: five products per tile when
one program owns a key block and adds its part of ``dQ`` into memory shared with
the other programs, with atomic additions on a GPU (FlashAttention-2, Dao 2023,
Sec. 3.2). Triton's fused-attention tutorial, and this package's kernels, avoid the
atomics with a second kernel that owns the query blocks and recomputes ``S`` and
``dP`` to accumulate ``dQ``: seven products. PaLM's ``12 L H d T`` charges six, the
forward's two and backward's four. :func:`count_matmuls` reads the counts from the
functions themselves, so the table follows the code.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); counting does not
    from matplotlib.figure import Figure

PALM_PRODUCTS = 6  # 12 L H d T = 3 x (2 products x 2 H d T): forward 2, backward 4


def _is_matmul(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        return True  # a @ b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else ""
        return (name, node.func.attr) in {("tl", "dot"), ("torch", "matmul")}
    return False


def count_matmuls(fn: Callable[..., Any]) -> int:
    """Matrix products written in a function's source: ``@``, ``tl.dot``, ``matmul``.

    Each is one product of tiles per loop iteration; the count is what the kernel
    executes per visited tile.

    Args:
        fn: a Python function or a ``triton.jit`` kernel (its ``fn`` is read).

    Returns:
        The number of matrix products in the source.

    Raises:
        TypeError: ``fn`` has no Python source.
    """
    fn = getattr(fn, "fn", fn)  # triton.jit wraps the Python function
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as err:
        raise TypeError(
            f"fn must be a Python function with source, got {fn!r}"
        ) from err
    return sum(_is_matmul(node) for node in ast.walk(ast.parse(source)))


def backward_matmuls() -> dict[str, int]:
    """Products per tile of the forward and of the two backward designs, from the code.

    Returns:
        ``forward`` (:func:`~aiinfra.models.flash.attention.tiled_forward`),
        ``one kernel`` (:func:`~aiinfra.models.flash.attention.tiled_backward`,
        ``dQ`` accumulated across key blocks, atomically on a GPU), ``dK dV kernel``
        and ``dQ kernel`` (the Triton kernels, no atomics), and ``two kernels``.
    """
    from aiinfra.models.flash import attention as flash_attention
    from aiinfra.models.flash import triton_backward as flash_triton_backward

    counts = {
        "forward": count_matmuls(flash_attention.tiled_forward),
        "one kernel": count_matmuls(flash_attention.tiled_backward),
        "dK dV kernel": count_matmuls(flash_triton_backward._attn_bwd_dkdv),
        "dQ kernel": count_matmuls(flash_triton_backward._attn_bwd_dq),
    }
    counts["two kernels"] = counts["dK dV kernel"] + counts["dQ kernel"]
    return counts


def backward_table() -> Table:
    """Products per tile of each design and what they cost against one kernel."""
    n = backward_matmuls()
    fwd, one, two = n["forward"], n["one kernel"], n["two kernels"]
    rows = [
        ["PaLM's count (12 L H d T)", 2, PALM_PRODUCTS - 2, "", "1.00"],
        [
            "one kernel, atomic dQ",
            fwd,
            one,
            "1.00",
            f"{(fwd + one) / PALM_PRODUCTS:.2f}",
        ],
        [
            "two kernels, no atomics",
            fwd,
            f"{n['dK dV kernel']} + {n['dQ kernel']}",
            f"{two / one:.2f}",
            f"{(fwd + two) / PALM_PRODUCTS:.2f}",
        ],
    ]
    note = (
        "Products of a B_r x B_c tile, 2 B_r B_c d FLOPs each, counted in the source "
        "of tiled_forward, tiled_backward and the two Triton backward kernels."
    )
    return Table(
        [
            "design",
            "forward products",
            "backward products",
            "backward FLOPs vs one kernel",
            "training FLOPs vs PaLM's count",
        ],
        rows,
        note,
    )


def backward_figure() -> Figure:
    """Products per tile of a training step, stacked by pass, for each design.

    Returns:
        One horizontal bar per design (PaLM's count, one backward kernel with an
        atomic ``dQ``, two backward kernels), stacked forward, backward and, for
        the two kernels, the ``dQ`` kernel's share.
    """
    from matplotlib.figure import Figure

    n = backward_matmuls()
    designs = ["PaLM's count", "one kernel, atomic dQ", "two kernels, no atomics"]
    forward = [2, n["forward"], n["forward"]]
    backward = [PALM_PRODUCTS - 2, n["one kernel"], n["dK dV kernel"]]
    dq_kernel = [0, 0, n["dQ kernel"]]
    fig = Figure(figsize=(6, 2.6), layout="constrained")
    ax = fig.add_subplot()
    ax.barh(designs, forward, label="forward")
    ax.barh(designs, backward, left=forward, label="backward (dK, dV, dQ)")
    left = [f + b for f, b in zip(forward, backward, strict=True)]
    ax.barh(designs, dq_kernel, left=left, label="backward, dQ kernel")
    totals = [f + b + q for f, b, q in zip(forward, backward, dq_kernel, strict=True)]
    for y, total in enumerate(totals):
        ax.annotate(str(total), (total + 0.1, y), va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("matrix products per tile")
    ax.set_xlim(0, max(totals) + 1)
    fig.legend(fontsize=7, loc="outside upper center", ncols=3)
    return fig
