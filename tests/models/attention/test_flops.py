"""Attention FLOPs by convention, against brute-force counts of the attention mask."""

import dataclasses

import pytest
import torch
from aiinfra.models.attention.flops import (
    attended_pairs,
    attention_training_flops,
    conventions_table,
)
from aiinfra.models.flops import attention_flops_per_token
from aiinfra.models.presets import preset


def _mask_pairs(T: int, causal: bool, window: int) -> int:
    """Brute force: count the True entries of the (T, T) attention mask."""
    visible = torch.ones(T, T, dtype=torch.bool)
    if causal:
        visible = visible.tril()
    if window:
        visible &= torch.ones(T, T, dtype=torch.bool).triu(-(window - 1))
    return int(visible.sum())


@pytest.mark.parametrize("T", [1, 7, 64, 97])
def test_full_and_causal_pairs_count_the_mask(T):
    assert attended_pairs(T, "full") == _mask_pairs(T, causal=False, window=0)
    assert attended_pairs(T, "causal") == _mask_pairs(T, causal=True, window=0)


@pytest.mark.parametrize(("T", "W"), [(5, 8), (8, 8), (9, 8), (97, 16), (200, 1)])
def test_window_pairs_count_the_banded_mask(T, W):
    assert attended_pairs(T, "window", W) == _mask_pairs(T, causal=True, window=W)


def test_window_zero_means_causal():
    assert attended_pairs(50, "window", 0) == attended_pairs(50, "causal")


@pytest.mark.parametrize("name", ["llama-3-8b", "mistral-7b", "deepseek-v2"])
def test_full_convention_is_palms_term(name):
    c = preset(name)
    assert attention_training_flops(c, 4096, "full") == attention_flops_per_token(
        c, 4096
    )


def test_mistral_window_counts_about_t_w_pairs_past_the_window():
    c = preset("mistral-7b")
    T, W = 32768, c.sliding_window
    per_pair = attention_training_flops(c, 1, "full")  # FLOPs of one pair
    window = attention_training_flops(c, T, "window") * T / per_pair
    assert window / (T * W) == pytest.approx(1, rel=W / T)  # T W within W^2 / 2
    no_window = dataclasses.replace(c, sliding_window=0)
    assert attention_training_flops(no_window, T, "window") > 3 * (
        attention_training_flops(c, T, "window")
    )


def test_table_full_column_is_palms_term():
    table = conventions_table(seq_len=8192)
    for row in table.rows:
        palm = attention_flops_per_token(preset(row[0]), 8192)
        assert row[2] == round(palm / 1e9, 1)
        assert row[4] <= row[2] / 2 + 0.1  # a causal kernel does about half or less


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seq_len": 0}, "seq_len"),
        ({"seq_len": 8, "window": -1}, "window"),
        ({"seq_len": 8, "convention": "half"}, "convention"),
        ({"seq_len": 8.0}, "seq_len"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        attended_pairs(**kwargs)


def test_mistral_window_saves_a_third_at_its_8192_token_context():
    # Jiang et al. 2023, Table 1: window 4096, context_len 8192 (v0.1; the 32768 of
    # its config.json is not the context it was trained at). Counted on the mask:
    # 8192 * 8193 / 2 causal pairs against 4096 * 4097 / 2 + 4096 * 4096.
    from aiinfra.book.models import transformer as page

    assert (page.mistral_context(), page.mistral_window()) == (8192, 4096)
    T, W = 1024, 512  # the same ratio on a mask small enough to build
    ratio = _mask_pairs(T, causal=True, window=0) / _mask_pairs(T, True, W)
    assert ratio == pytest.approx((T * (T + 1) / 2) / (W * (W + 1) / 2 + (T - W) * W))
    assert page.mistral_window_saving() == pytest.approx(
        (8192 * 8193 / 2) / (4096 * 4097 / 2 + 4096 * 4096)
    )
