"""The rank layout of a DP x PP x CP x TP mesh against hand-written groups.

Ground truths: groups written out by hand for 8 = 2 x 2 x 2 ranks; Llama 3's
Figure 5 (Dubey et al. 2024: 16 GPUs with every dimension of size 2, "GPU0 and GPU1
are in the same TP group, GPU0 and GPU2 in the same CP group, GPU0 and GPU4 in the
same PP group, GPU0 and GPU8 in the same DP group"); a 64-GPU job in nodes of 8
whose tensor-parallel groups must be the nodes; and, for node crossings, the
nodes of every rank of every group, listed one by one.
"""

from __future__ import annotations

import itertools

import pytest
from aiinfra.plan.mesh import MESH_DIMS, MeshLayout, mesh_layout


def test_eight_ranks_as_dp2_pp2_tp2_match_hand_written_groups():
    layout = mesh_layout(8, dp=2, pp=2, tp=2)
    assert layout.groups("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert layout.groups("pp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert layout.groups("dp") == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert layout.groups("cp") == [[r] for r in range(8)]
    assert layout.coordinate(7) == {"dp": 1, "pp": 1, "cp": 0, "tp": 1}
    assert layout.coordinate(5) == {"dp": 1, "pp": 0, "cp": 0, "tp": 1}


def test_llama3_figure5_sixteen_gpus():
    layout = mesh_layout(16, dp=2, pp=2, cp=2, tp=2)
    assert layout.group_of(0, "tp") == [0, 1]
    assert layout.group_of(0, "cp") == [0, 2]
    assert layout.group_of(0, "pp") == [0, 4]
    assert layout.group_of(0, "dp") == [0, 8]
    # GPU1 is [TP1, CP0, PP0, DP0] in the figure's vector notation.
    assert layout.coordinate(1) == {"dp": 0, "pp": 0, "cp": 0, "tp": 1}


def test_64_gpus_in_nodes_of_8_put_each_tp_group_in_one_node():
    layout = mesh_layout(64, dp=4, pp=2, tp=8)
    assert layout.groups("tp") == [list(range(8 * k, 8 * k + 8)) for k in range(8)]
    assert layout.group_of(0, "pp") == [0, 8]
    assert layout.group_of(0, "dp") == [0, 16, 32, 48]
    assert not layout.crosses_nodes("tp")
    assert layout.crosses_nodes("pp") and layout.crosses_nodes("dp")


def test_shard_group_is_dp_times_cp():
    layout = mesh_layout(16, dp=2, pp=2, cp=2, tp=2)
    assert layout.group_of(0, ("dp", "cp")) == [0, 2, 8, 10]
    assert layout.group_of(0, ("cp", "dp")) == [0, 2, 8, 10]


@pytest.mark.parametrize("shape", [(3, 2, 2, 2), (2, 3, 1, 4), (5, 1, 3, 1)])
def test_groups_partition_the_ranks_and_coordinates_round_trip(shape):
    dp, pp, cp, tp = shape
    layout = MeshLayout(dp, pp, cp, tp, gpus_per_node=tp)
    for dim in MESH_DIMS:
        flat = sorted(r for g in layout.groups(dim) for r in g)
        assert flat == list(range(layout.world_size))
        assert all(len(g) == getattr(layout, dim) for g in layout.groups(dim))
    for r in range(layout.world_size):
        assert layout.rank(**layout.coordinate(r)) == r


def test_crosses_nodes_agrees_with_listing_each_groups_nodes():
    for dp, pp, cp, tp in itertools.product([1, 2, 3], [1, 2, 3], [1, 2, 4], [1, 2, 4]):
        for per_node in {tp, 2 * tp, 8}:
            n = dp * pp * cp * tp
            if per_node % tp or (n > per_node and n % per_node):
                continue
            layout = MeshLayout(dp, pp, cp, tp, per_node)
            for dims in (*MESH_DIMS, ("dp", "cp")):
                listed = any(
                    len({r // per_node for r in g}) > 1 for g in layout.groups(dims)
                )
                assert layout.crosses_nodes(dims) == listed, (layout, dims)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"world_size": 8, "tp": 3, "dp": 2}, "tp = 3 must divide gpus_per_node"),
        ({"world_size": 8, "tp": 2, "dp": 2}, "must equal world_size = 8"),
        ({"world_size": 12, "tp": 2, "dp": 6}, "multiple of gpus_per_node"),
        ({"world_size": 8, "tp": 0}, "tp must be an int >= 1"),
        ({"world_size": 0}, "world_size must be an int >= 1"),
    ],
)
def test_bad_layouts_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mesh_layout(**kwargs)


def test_unknown_dimensions_and_ranks_are_rejected():
    layout = mesh_layout(4, dp=2, tp=2)
    with pytest.raises(ValueError, match="dims must be among"):
        layout.group_of(0, "ep")
    with pytest.raises(ValueError, match="rank must be in"):
        layout.coordinate(4)
    with pytest.raises(ValueError, match="dimensions must be among"):
        layout.rank(ep=1)
