"""What range and precision do to the numbers of training, computed.

Three failures decide which 16-bit format a model can train in (Micikevicius et al.
2018; Kalamkar et al. 2019). Overflow: fp16 stops at 65504, so a large activation or
loss becomes infinity. Rounding: with M mantissa bits, 1 + x equals 1 for x up to
eps/2, eps/2 included: round to nearest, ties to even (IEEE 754), sends the tie 1 +
eps/2 to 1, whose last mantissa bit is even. A small update to a weight of size 1 is
lost. Underflow: gradients below
the smallest subnormal become zero; fp16's is 2^-24 (about 6e-8), and Micikevicius
et al. show networks whose activation gradients lie largely below it. bf16 trades
mantissa for fp32's exponent: no overflow or underflow at training scales, but a
coarser eps. Multiplying the loss by a scale S shifts every gradient up by S, which
is what loss scaling uses. Every value below is a cast done by PyTorch.
"""

from __future__ import annotations

import torch

from aiinfra.precision.formats import DTYPES, float_format, to_tf32
from aiinfra.report import Table

LOSS_SCALE = 2.0**16  # GradScaler's default initial scale


def cast(x: float, name: str) -> float:
    """Round ``x`` to the format ``name`` and read it back as a Python float.

    Args:
        x: a value, exact in fp64.
        name: a format of :data:`aiinfra.precision.formats.DTYPES`; ``"tf32"`` is
            emulated by :func:`aiinfra.precision.formats.to_tf32`.

    Returns:
        The nearest representable value (or what PyTorch's cast gives for values
        out of range: ``inf`` for IEEE formats, saturation for ``float8_e4m3fn``).

    Raises:
        ValueError: an unknown format name.
    """
    float_format(name)  # validates the name
    if name == "tf32":
        return to_tf32(torch.tensor([x], dtype=torch.float32)).item()
    t = torch.tensor([x], dtype=torch.float64)
    return t.to(DTYPES[name]).to(torch.float64).item()


def examples() -> dict[str, float]:
    """The values the table casts, by the failure they show."""
    fp16 = float_format("fp16")
    return {
        "overflow: 70000 (fp16 max 65504)": 70000.0,
        "rounding: 1 + 2^-8": 1.0 + 2.0**-8,
        "rounding: 1 + 2^-11": 1.0 + 2.0**-11,
        "small gradient: 1e-5": 1e-5,
        "underflow: 1e-8 (below fp16 min subnormal)": 1e-8,
        "1e-8 x loss scale 2^16": 1e-8 * LOSS_SCALE,
        "half the fp16 min subnormal": fp16.min_subnormal / 2,
    }


def one_plus(x: float, name: str) -> float:
    """``1 + x`` added by PyTorch in the format ``name`` (both operands in it).

    Args:
        x: the increment, exact in the format.
        name: ``"fp32"``, ``"bf16"`` or ``"fp16"``.

    Returns:
        The rounded sum, as a Python float.

    Raises:
        ValueError: ``name`` is not one of those formats, or ``x`` is not exact in it.
    """
    if name not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"name must be 'fp32', 'bf16' or 'fp16', got {name!r}")
    if cast(x, name) != x:
        raise ValueError(f"x = {x!r} is not exact in {name}")
    dtype = DTYPES[name]
    one = torch.ones((), dtype=dtype)
    return (one + torch.tensor(x, dtype=dtype)).item()


def rounding_table(names: tuple[str, ...] = ("fp32", "bf16", "fp16")) -> Table:
    """1 + eps/2 and 1 + just above eps/2, added in each format by PyTorch.

    Args:
        names: formats, one row each.

    Returns:
        One row per format: eps, 1 + eps/2 (a tie: rounds to 1, the even
        neighbour) and 1 + (eps/2)(1 + eps) (rounds up to 1 + eps).
    """

    def shown(v: float, eps: float) -> str:  # the sum, named by its neighbours
        return {1.0: "1", 1 + eps: "1 + eps"}.get(v, repr(v))

    rows = []
    for name in names:
        eps = float_format(name).eps
        tie, above = eps / 2, eps / 2 * (1 + eps)
        exponent = eps.hex().split("p")[1]  # eps = 2^exponent
        rows.append(
            [
                name,
                f"2^{exponent}",
                shown(one_plus(tie, name), eps),
                shown(one_plus(above, name), eps),
            ]
        )
    return Table(
        columns=["format", "eps", "1 + eps/2", "1 + (eps/2)(1 + eps)"],
        rows=rows,
        note="Both operands in the format, added by PyTorch; round to nearest, "
        "ties to even: the tie goes to 1, whose last mantissa bit is 0.",
        stamp=f"PyTorch {torch.__version__.split('+')[0]}",
    )


def numerics_table(names: tuple[str, ...] = tuple(DTYPES)) -> Table:
    """Each example value after a round trip through each format.

    Args:
        names: formats to show, columns in this order.

    Returns:
        A table, one row per :func:`examples` entry, values to 6 significant
        digits (enough to show 1 + 2^-11).
    """
    rows = [
        [label, *(f"{v:.6g}" for v in (x, *(cast(x, n) for n in names)))]
        for label, x in examples().items()
    ]
    return Table(
        columns=["example", "exact", *names],
        rows=rows,
        note="Values after rounding to each format with PyTorch; tf32 emulated by "
        "masking fp32 bits.",
        stamp=f"PyTorch {torch.__version__.split('+')[0]}",
    )
