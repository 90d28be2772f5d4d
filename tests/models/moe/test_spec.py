"""MoESpec: the published models' switches are accepted, impossible shapes refused."""

import pytest
from aiinfra.models.moe.spec import MoESpec


def test_the_published_layers_are_valid_specs():
    mixtral = MoESpec(8, 2, 14336)
    qwen = MoESpec(
        60, 4, 1408, n_shared=4, d_shared=5632, shared_gate=True, norm_topk=False
    )
    v3 = MoESpec(
        256,
        8,
        2048,
        n_shared=1,
        router="sigmoid",
        routed_scale=2.5,
        n_groups=8,
        topk_groups=4,
        group_score="top2",
    )
    assert (mixtral.shared_width, qwen.shared_width, v3.shared_width) == (0, 5632, 2048)
    # DeepSeek-V2 fuses its 2 shared experts into one MLP of twice the width.
    assert MoESpec(160, 6, 1536, n_shared=2).shared_width == 3072


def test_capacity_is_the_even_share_times_the_factor_rounded_up():
    # Switch Transformer, Sec. 2.2: (tokens / experts) x capacity factor, per slot.
    assert MoESpec(8, 1, 16, capacity_factor=1.0).capacity(64) == 8
    assert MoESpec(8, 2, 16, capacity_factor=1.25).capacity(64) == 20  # 64*2/8*1.25
    assert MoESpec(8, 2, 16, capacity_factor=1.1).capacity(10) == 3  # 2.75 -> 3
    assert MoESpec(8, 2, 16).capacity(64) is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"top_k": 9}, r"top_k \(9\) must be <= n_experts \(8\)"),
        ({"n_experts": 0}, "n_experts must be an int >= 1, got 0"),
        ({"d_expert": 2.0}, "d_expert must be an int >= 1"),
        ({"router": "relu"}, "router must be one of"),
        ({"n_groups": 3}, r"n_experts \(8\) must be divisible by n_groups \(3\)"),
        ({"n_groups": 4, "topk_groups": 5}, r"topk_groups \(5\) must be <= n_groups"),
        ({"n_groups": 4, "topk_groups": 1, "top_k": 3}, "hold fewer than top_k"),
        ({"d_shared": 32}, "d_shared is given but n_shared is 0"),
        ({"shared_gate": True}, "shared_gate is True but n_shared is 0"),
        ({"capacity_factor": 0.0}, "capacity_factor must be > 0 or None"),
        ({"routed_scale": -1.0}, "routed_scale must be > 0"),
        ({"norm_topk": 1}, "norm_topk must be a bool"),
        ({"group_score": "sum"}, "group_score must be one of"),
    ],
)
def test_bad_fields_are_named(kwargs, message):
    fields = {"n_experts": 8, "top_k": 2, "d_expert": 16} | kwargs
    with pytest.raises(ValueError, match=message):
        MoESpec(**fields)


def test_a_negative_token_count_is_refused():
    with pytest.raises(ValueError, match="n_tokens must be an int >= 0"):
        MoESpec(8, 2, 16, capacity_factor=1.0).capacity(-1)
