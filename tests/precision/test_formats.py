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
from aiinfra.precision.numerics import cast, numerics_table
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
