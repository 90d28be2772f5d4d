"""Split-KV decoding against PyTorch's attention and this package's decoding path."""

import pytest
import torch
import torch.nn.functional as F
from aiinfra.models.attention.gqa import grouped_attention
from aiinfra.models.flash.split_kv import (
    combine,
    partial_attention,
    split_kv_attention,
    split_kv_figure,
    split_step_time,
    splits_by_efficiency,
    splits_to_fill,
    wave_efficiency,
)


def _qkv(B=2, H=8, G=2, T=1, S=97, D=16, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, T, D, generator=g).to(dtype)
    k = torch.randn(B, G, S, D, generator=g).to(dtype)
    v = torch.randn(B, G, S, D, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize("n_splits", [1, 2, 5, 97])
def test_split_kv_equals_sdpa_with_gqa(n_splits):
    q, k, v = _qkv()  # 97 cached tokens: chunks of unequal size
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    out = split_kv_attention(q, k, v, n_splits)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_split_kv_equals_the_decoding_step_of_grouped_attention():
    q, k, v = _qkv(B=1, H=4, G=1, T=1, S=33)
    ref = grouped_attention(q, k, v, start_pos=32)  # the last token sees all 33
    torch.testing.assert_close(split_kv_attention(q, k, v, 4), ref)


def test_bf16_error_is_within_twice_sdpas():
    q, k, v = _qkv(S=257, D=32, dtype=torch.bfloat16, seed=1)
    exact = F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), enable_gqa=True
    )
    sdpa = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    ours = split_kv_attention(q, k, v, 8)
    assert (ours.double() - exact).abs().max() <= 2 * (
        sdpa.double() - exact
    ).abs().max()


def test_chunks_merge_in_any_order():
    q, k, v = _qkv(B=1, G=1, H=2, S=30)
    rows = q.reshape(1, 1, 2, 16)  # (B, G, R T, D)
    parts = [
        partial_attention(rows, ks, vs, 0.25)
        for ks, vs in zip(k.split(10, dim=2), v.split(10, dim=2), strict=True)
    ]
    torch.testing.assert_close(combine(parts), combine(parts[::-1]))


def test_splits_to_fill_one_llama_sequence_on_an_h100():
    # 1 sequence x 8 KV heads = 8 programs; 132 SMs need 17 chunks (8 x 17 = 136).
    assert splits_to_fill(1, 8, 132) == 17
    assert splits_to_fill(64, 8, 132) == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_splits": 0}, r"n_splits must be an int in \[1, 97\]"),
        ({"n_splits": 98}, r"n_splits must be an int in \[1, 97\]"),
        ({"n_splits": 2.0}, "n_splits must be an int in"),
    ],
)
def test_bad_splits_are_rejected(kwargs, match):
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=match):
        split_kv_attention(q, k, v, **kwargs)


def test_mismatched_shapes_are_rejected():
    q, k, v = _qkv(H=6, G=4)  # 4 KV heads cannot be shared by 6 query heads
    with pytest.raises(ValueError, match="G must divide H"):
        split_kv_attention(q, k, v, 2)
    with pytest.raises(ValueError, match="sms must be"):
        splits_to_fill(1, 8, 0)


def _brute_force_makespan(programs, sms, duration):
    """Greedy list schedule: each program goes to the SM that frees up first."""
    free = [0.0] * sms
    for _ in range(programs):
        i = free.index(min(free))
        free[i] += duration
    return max(free)


@pytest.mark.parametrize(
    ("programs", "sms"), [(8, 132), (136, 132), (264, 132), (7, 3)]
)
def test_wave_efficiency_equals_a_brute_force_schedule(programs, sms):
    makespan = _brute_force_makespan(programs, sms, 1.0)
    assert wave_efficiency(programs, sms) == pytest.approx(programs / (sms * makespan))


def test_wave_efficiency_matches_flash_attentions_published_example():
    # flash_api.cpp: "batch * n_heads = 48 and we have 108 SMs, having 2 splits
    # (efficiency = 0.89) is better than having 3 splits (efficiency = 0.67)".
    assert wave_efficiency(48 * 2, 108) == pytest.approx(0.89, abs=0.005)
    assert wave_efficiency(48 * 3, 108) == pytest.approx(0.67, abs=0.005)
    assert splits_by_efficiency(1, 48, 108) == 2


@pytest.mark.parametrize("n_splits", [1, 15, 16, 17, 33])
def test_split_step_time_equals_a_brute_force_schedule(n_splits):
    # One Llama 3 8B sequence (8 KV heads) on 132 SMs; each program takes 1 / n.
    expected = _brute_force_makespan(8 * n_splits, 132, 1 / n_splits)
    assert split_step_time(1, 8, 132, n_splits) == pytest.approx(expected)


def test_heuristic_keeps_one_chunk_when_the_heads_nearly_fill_the_gpu():
    assert splits_by_efficiency(16, 8, 132) == 1  # 128 programs on 132 SMs


def test_split_kv_figure_marks_both_chunk_counts():
    fig = split_kv_figure(1, 8, 132, 40)
    top = fig.axes[0]
    marks = sorted(line.get_xdata()[0] for line in top.lines[1:])
    assert marks == [15, 17]


@pytest.mark.parametrize(
    ("fn", "args", "match"),
    [
        (wave_efficiency, (0, 132), "programs must be"),
        (wave_efficiency, (8, True), "sms must be"),
        (split_step_time, (1, 8, 132, 0), "n_splits must be"),
        (split_step_time, (1.5, 8, 132, 2), "batch must be"),
        (splits_by_efficiency, (1, 8, 132, 0), "max_splits must be"),
        (splits_by_efficiency, (1, -8, 132), "kv_heads must be"),
        (split_kv_figure, (1, 8, 132, 0), "max_splits must be"),
    ],
)
def test_bad_wave_model_arguments_are_rejected(fn, args, match):
    with pytest.raises(ValueError, match=match):
        fn(*args)
