"""W8A8 in fp8 and int8 against hand-computed roundings."""

from __future__ import annotations

import pytest
import torch
from aiinfra.book.inference import fp8 as page
from aiinfra.infer.quant.w8a8 import (
    SCALINGS,
    FakeW8A8Linear,
    fake_quantize,
    w8a8_error,
    w8a8_matmul,
)


def test_fp8_per_tensor_by_hand():
    # amax 1 -> sigma 1/448; 0.1 * 448 = 44.8, whose E4M3 neighbours (step 4 in
    # [32, 64)) are 44 and 48: it rounds to 44.
    x = torch.tensor([[1.0, 0.1]])
    got = fake_quantize(x, "fp8", None).flatten().tolist()
    assert got == pytest.approx([1.0, 44 / 448])


def test_int8_per_row_by_hand():
    # Row 0: amax 2 -> sigma 2/127; 0.3 * 63.5 = 19.05 -> 19. Row 1: amax 1.
    x = torch.tensor([[2.0, 0.3], [1.0, -0.5]])
    want = [2.0, 19 * 2 / 127, 1.0, -64 / 127]  # -63.5 rounds half to even: -64
    assert fake_quantize(x, "int8", (1, -1)).flatten().tolist() == pytest.approx(want)


def test_error_by_hand_on_small_matrix():
    # X = [[1, 0.1]], W = [[1, 1]]: fp8 per tensor gives 1 + 44/448 against 1.1.
    x, w = torch.tensor([[1.0, 0.1]]), torch.tensor([[1.0, 1.0]])
    want = abs((1 + 44 / 448) - 1.1) / 1.1
    assert w8a8_error(x, w, "fp8", "per tensor") == pytest.approx(want, rel=1e-4)
    # int8 per token / channel: 0.1 * 127 = 12.7 -> 13.
    want = abs((1 + 13 / 127) - 1.1) / 1.1
    assert w8a8_error(x, w, "int8", "per token / channel") == pytest.approx(
        want, rel=1e-4
    )


def test_exact_operands_have_no_error():
    x = torch.tensor([[448.0, -2.0, 0.5, 0.0]]).repeat(128, 32)  # (128, 128)
    for scaling in SCALINGS:
        assert w8a8_error(x, x.clone(), "fp8", scaling) < 1e-6  # fp32 accumulation


def test_page_table_matches_direct_computation():
    x, w = page._layer(page.FP8_OUTLIER)
    got = page.fp8_w8a8_error("int8", "per tensor")
    assert got == pytest.approx(100 * w8a8_error(x, w, "int8", "per tensor"))
    rows = page.fp8_error_table().rows
    assert [r[0] for r in rows] == list(SCALINGS)


def test_decode_bound_halves_bytes():
    b16, b8 = page._step_bytes("bf16", 1), page._step_bytes("fp8", 1)
    assert 1.9 < b16 / b8 < 2.0  # weights halve; the bf16 cache does not


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"fmt": "int4"}, "fmt"),
        ({"scaling": "per group"}, "scaling"),
        ({"w": torch.ones(4, 3)}, "in"),
    ],
)
def test_bad_arguments_raise(kwargs, name):
    args = {"x": torch.ones(2, 4), "w": torch.ones(4, 4), "fmt": "fp8"}
    args["scaling"] = "per tensor"
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        w8a8_matmul(**args)


def test_bad_tensor_raises_type_error():
    with pytest.raises(TypeError, match="x must"):
        w8a8_matmul(
            torch.ones(2, 4, dtype=torch.int64), torch.ones(4, 4), "fp8", "per tensor"
        )


def test_block_must_tile():
    with pytest.raises(ValueError, match="block"):
        w8a8_matmul(
            torch.ones(2, 100),
            torch.ones(4, 100),
            "fp8",
            "1x128 tiles / 128x128 blocks",
        )


@pytest.mark.parametrize("fmt", ["fp8", "int8"])
@pytest.mark.parametrize("blocks", [(None, None), ((1, 8), (8, 8))])
def test_the_layer_computes_the_w8a8_product_token_by_token(fmt, blocks):
    g = torch.Generator().manual_seed(3)
    lin = torch.nn.Linear(16, 24, bias=True)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(24, 16, generator=g))
    x = torch.randn(2, 5, 16, generator=g)  # (B, T, in): ten tokens
    layer = FakeW8A8Linear(lin, fmt, *blocks)
    x2 = x.reshape(10, 16)
    # by hand: each operand rounded with its own blocks, then X W^T + b
    want = (
        fake_quantize(x2, fmt, blocks[0]) @ fake_quantize(lin.weight, fmt, blocks[1]).T
    )
    got = layer(x)
    assert got.shape == (2, 5, 24)
    torch.testing.assert_close(got.reshape(10, 24), want + lin.bias.detach())
    exact = lin(x).detach()
    assert 0 < ((got - exact).norm() / exact.norm()).item() < 0.1


def test_the_layer_refuses_a_block_that_does_not_tile_the_weight():
    with pytest.raises(ValueError):
        FakeW8A8Linear(torch.nn.Linear(16, 24), "fp8", None, (7, 7))
    with pytest.raises(ValueError, match="fmt"):
        FakeW8A8Linear(torch.nn.Linear(16, 24), "int4", None, None)


def test_the_trained_models_numbers_say_what_the_page_says():
    # fp8.rst: INT8 per tensor is the more precise on average, except on the second
    # block's down projection, where FP8 wins and tiles fix INT8.
    assert page.fp8_model_error("int8") < page.fp8_model_error("fp8")
    w2 = "blocks.1.mlp.w2"
    assert page.fp8_model_layer_error("fp8", w2) < page.fp8_model_layer_error(
        "int8", w2
    )
    assert page.fp8_model_layer_error("int8", w2, True) < page.fp8_model_layer_error(
        "fp8", w2
    )
    assert page.fp8_model_error("int8", True) < page.fp8_model_error("int8")
    with pytest.raises(ValueError, match="layer must be one of"):
        page.fp8_model_layer_error("fp8", "blocks.9.mlp.w2")
    with pytest.raises(ValueError, match="fmt must be one of"):
        page.fp8_model_error("int4")
    with pytest.raises(TypeError, match="tiles must be a bool"):
        page.fp8_model_error("fp8", 32)
