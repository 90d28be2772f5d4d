"""HCCL_ALGO read as CANN's environment variable reference documents it."""

import pytest
from aiinfra.comm.hccl.algo_env import ALL, documented_default, parse_hccl_algo


def test_the_documented_examples():
    # CANN 8.0 HCCL_ALGO page, 配置示例: the global and the per-operator forms.
    assert parse_hccl_algo("level0:NA;level1:H-D_R") == {ALL: "H-D_R"}
    value = "alltoall=level0:NA;level1:pairwise/allreduce=level0:NA;level1:NHR"
    assert parse_hccl_algo(value) == {"alltoall": "pairwise", "allreduce": "NHR"}


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("level0:ring;level1:NHR", "level0"),
        ("level1:NHR", "level0:NA;level1"),
        ("level0:NA;level1:tree", "level1"),
        ("allreduce=level0:NA;level1:pairwise", "pairwise"),
        ("allgatherv=level0:NA;level1:ring", "operator"),
        ("reduce=level0:NA;level1:ring/reduce=level0:NA;level1:NB", "twice"),
    ],
)
def test_bad_values_say_what_is_wrong(value, match):
    with pytest.raises(ValueError, match=match):
        parse_hccl_algo(value)
    with pytest.raises(TypeError, match="HCCL_ALGO"):
        parse_hccl_algo(3)


def test_the_documented_defaults():
    # Atlas training series: ring when the server count is not a power of two,
    # else H-D_R; Atlas A2: chosen inside HCCL, rule not published.
    assert [documented_default(s, "atlas-training") for s in (1, 2, 3, 4, 6, 8)] == [
        "H-D_R",
        "H-D_R",
        "ring",
        "H-D_R",
        "ring",
        "H-D_R",
    ]
    assert documented_default(3, "atlas-a2") is None
