"""Bit layouts derived from torch.finfo against the published layouts, and ranges."""

import pytest
import torch
from aiinfra.precision.figures import bit_layout_figure
from aiinfra.precision.formats import (
    DTYPES,
    finfo_format,
    float_format,
    formats_table,
    ieee_format,
    to_tf32,
)
from aiinfra.precision.numerics import cast, numerics_table, one_plus, rounding_table
from matplotlib.figure import Figure

# IEEE 754-2019 (binary32, binary16), bfloat16 (Kalamkar et al. 2019), TF32 (NVIDIA
# A100 whitepaper), FP8 E4M3/E5M2 (Micikevicius et al. 2022).
PUBLISHED = {
    "fp32": (1, 8, 23),
    "tf32": (1, 8, 10),
    "bf16": (1, 8, 7),
    "fp16": (1, 5, 10),
    "fp8 e4m3": (1, 4, 3),
    "fp8 e5m2": (1, 5, 2),
}


@pytest.mark.parametrize("name", list(DTYPES))
def test_derived_bit_fields_match_the_published_layouts(name):
    f = float_format(name)
    assert (f.sign_bits, f.exponent_bits, f.mantissa_bits) == PUBLISHED[name]


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8 e5m2"])
def test_ieee_rule_gives_finfo_values(name):
    f, rule = float_format(name), ieee_format(name, *PUBLISHED[name][1:])
    assert (f.max, f.min_normal, f.min_subnormal, f.eps) == (
        rule.max,
        rule.min_normal,
        rule.min_subnormal,
        rule.eps,
    )


def test_e4m3fn_reclaims_the_infinity_exponent():
    # E4M3 "fn": no infinities, only S.1111.111 is NaN, so 1.75 x 2^8 = 448 is
    # finite, where the IEEE rule would stop at 1.875 x 2^7 = 240.
    assert float_format("fp8 e4m3").max == 448.0
    assert ieee_format("e4m3", 4, 3).max == 240.0


@pytest.mark.parametrize("name", ["fp32", "bf16", "fp16", "fp8 e4m3", "fp8 e5m2"])
def test_smallest_subnormal_survives_and_half_of_it_flushes(name):
    f = float_format(name)
    assert cast(f.min_subnormal, name) == f.min_subnormal
    assert cast(f.min_subnormal / 2, name) == 0.0  # a tie, rounded to even: 0
    assert cast(1 + f.eps, name) == 1 + f.eps
    assert cast(1 + f.eps / 2, name) == 1.0


def test_tf32_rounding_keeps_ten_mantissa_bits():
    x = torch.tensor([1 + 2**-10, 1 + 2**-11, 1 + 3 * 2**-11, -(1 + 3 * 2**-11)])
    expected = torch.tensor([1 + 2**-10, 1.0, 1 + 2**-9, -(1 + 2**-9)])
    assert torch.equal(to_tf32(x), expected)
    assert float_format("tf32").eps == 2**-10


def test_numerics_table_shows_overflow_rounding_and_underflow():
    t = numerics_table()
    rows = {r[0]: dict(zip(t.columns, r, strict=True)) for r in t.rows}
    assert rows["overflow: 70000 (fp16 max 65504)"]["fp16"] == "inf"
    assert rows["overflow: 70000 (fp16 max 65504)"]["bf16"] == "70144"
    assert rows["rounding: 1 + 2^-8"]["bf16"] == "1"
    assert rows["rounding: 1 + 2^-8"]["fp16"] == "1.00391"
    assert rows["underflow: 1e-8 (below fp16 min subnormal)"]["fp16"] == "0"
    assert rows["1e-8 x loss scale 2^16"]["fp16"] != "0"
    assert len(formats_table().rows) == len(DTYPES)


def test_figure_draws_one_box_per_bit():
    fig = bit_layout_figure()
    assert isinstance(fig, Figure)
    boxes = [p for p in fig.axes[0].patches]
    assert len(boxes) == sum(float_format(n).bits for n in DTYPES)


def test_bad_format_input_is_rejected():
    with pytest.raises(ValueError, match="unknown format"):
        float_format("fp4")
    with pytest.raises(TypeError, match="floating-point"):
        finfo_format("int8", torch.int8)
    with pytest.raises(TypeError, match="float32"):
        to_tf32(torch.ones(2, dtype=torch.float16))
    with pytest.raises(ValueError, match="exponent_bits"):
        ieee_format("x", 1, 3)


# IEEE 754-2019, Sec. 4.3.1: round to nearest, ties to even. eps = 2^-M (M = 23,
# 7, 10); 1 + eps/2 lies halfway between 1 (mantissa ...0) and 1 + eps (...1).
EPS = {"fp32": 2.0**-23, "bf16": 2.0**-7, "fp16": 2.0**-10}
DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.mark.parametrize("name", list(EPS))
def test_one_plus_half_eps_rounds_to_one_and_just_above_rounds_up(name):
    eps, dtype = EPS[name], DTYPE[name]
    one = torch.ones((), dtype=dtype)
    # torch directly, both operands in the format: the tie goes to the even 1 ...
    assert (one + torch.tensor(eps / 2, dtype=dtype)).item() == 1.0
    # ... one ulp of x above the tie rounds up, and a quarter of eps goes to 1.
    above = torch.tensor(eps / 2 * (1 + eps), dtype=dtype)
    assert above.item() == eps / 2 * (1 + eps)  # exact in the format
    assert (one + above).item() == 1 + eps
    assert (one + torch.tensor(eps / 4, dtype=dtype)).item() == 1.0
    # 1 + eps/2 + 2 eps: the tie between 1 + 2 eps (even) and 1 + 3 eps goes down,
    # so ties do not always round towards 1: they round to the even mantissa.
    base = torch.tensor(1 + 2 * eps, dtype=dtype)
    assert (base + torch.tensor(eps / 2, dtype=dtype)).item() == 1 + 2 * eps
    base = torch.tensor(1 + eps, dtype=dtype)  # odd: the tie goes up to 1 + 2 eps
    assert (base + torch.tensor(eps / 2, dtype=dtype)).item() == 1 + 2 * eps
    assert one_plus(eps / 2, name) == 1.0 and one_plus(eps / 2 * (1 + eps), name) == (
        1 + eps
    )


def test_rounding_table_shows_the_tie_and_just_above():
    rows = {r[0]: r[1:] for r in rounding_table().rows}
    assert rows == {
        "fp32": ["2^-23", "1", "1 + eps"],
        "bf16": ["2^-7", "1", "1 + eps"],
        "fp16": ["2^-10", "1", "1 + eps"],
    }


def test_one_plus_rejects_bad_formats_and_inexact_increments():
    with pytest.raises(ValueError, match="name must be"):
        one_plus(0.5, "fp8 e4m3")
    with pytest.raises(ValueError, match="is not exact in bf16"):
        one_plus(2.0**-8 * (1 + 2**-10), "bf16")
