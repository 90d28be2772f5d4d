"""The DeviceMesh that ``init_device_mesh`` builds has the pure layout's groups.

Ground truth: :class:`aiinfra.plan.mesh.MeshLayout` (itself pinned to hand-written
groups and to Llama 3's Figure 5 in ``tests/plan/test_mesh_layout.py``), and a
collective: the sum of the global ranks all-reduced over each mesh group equals the
sum of the ranks the layout lists. The rank side, :func:`mesh_checks`, runs inside
:mod:`spawned`'s one 4-rank gloo spawn on the world (layouts dp 2 x tp 2,
pp 2 x tp 2 and dp 2 x cp 2); on the pair groups it has nothing to build (a
DeviceMesh spans the world) and returns ``{}``. Under NCCL the same checks run on
whatever world the GPUs give.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from aiinfra.distributed import rank_device
from aiinfra.plan.device_mesh import build_device_mesh, mesh_group_ranks
from aiinfra.plan.mesh import MESH_DIMS, MeshLayout

from tests.parallel.spawned import gloo_results

SHARD = ("dp", "cp")  # the ZeRO/FSDP shard group


def _layouts(world: int) -> list[MeshLayout]:
    """Layouts that factor the world: dp x tp, pp x tp and dp x cp when even."""
    if world % 2:
        return [MeshLayout(dp=world, gpus_per_node=world)]
    half = world // 2
    return [
        MeshLayout(dp=2, tp=half, gpus_per_node=world),
        MeshLayout(pp=2, tp=half, gpus_per_node=world),
        MeshLayout(dp=2, cp=half, gpus_per_node=world),
    ]


def mesh_checks(group: dist.ProcessGroup | None) -> dict:
    """Per layout and dimension: the mesh's group, the layout's, the reduced sum."""
    if group is not None:  # a DeviceMesh covers the world; the pairs have none
        return {}
    device, rank = rank_device(), dist.get_rank()
    out = {}
    for layout in _layouts(dist.get_world_size()):
        mesh = build_device_mesh(layout)
        key = "x".join(f"{d}{n}" for d, n in zip(MESH_DIMS, layout.shape, strict=True))
        out[key] = {}
        for dims in (*MESH_DIMS, SHARD):
            name = dims if isinstance(dims, str) else "+".join(dims)
            total = torch.tensor([float(rank)], device=device)
            if isinstance(dims, str):
                dist.all_reduce(total, group=mesh.get_group(dims))
            out[key][name] = {
                "mesh": mesh_group_ranks(mesh, dims),
                "layout": layout.group_of(rank, dims),
                "sum": total.item() if isinstance(dims, str) else None,
                "mesh_dims": list(mesh.mesh_dim_names),
            }
    return out


def _world() -> list[dict]:
    return [r["world"]["mesh"] for r in gloo_results()]


@pytest.mark.slow  # shares the spawn of 4 gloo ranks
def test_device_mesh_groups_equal_the_layout_on_four_gloo_ranks():
    for rank, checks in enumerate(_world()):
        assert len(checks) == 3
        for key, dims in checks.items():
            for name, c in dims.items():
                assert c["mesh"] == c["layout"], (rank, key, name)
                assert c["mesh_dims"] == list(MESH_DIMS)
                if c["sum"] is not None:  # the collective ran over those ranks
                    assert c["sum"] == sum(c["layout"]), (rank, key, name)


@pytest.mark.slow  # shares the spawn of 4 gloo ranks
def test_tp_groups_on_four_ranks_are_consecutive_pairs():
    # Hand-written: dp 2 x tp 2 puts ranks {0, 1} and {2, 3} in TP groups and
    # {0, 2}, {1, 3} in DP groups; pp 2 x tp 2 the same with PP for DP.
    expected_tp = {0: [0, 1], 1: [0, 1], 2: [2, 3], 3: [2, 3]}
    for rank, checks in enumerate(_world()):
        assert checks["dp2xpp1xcp1xtp2"]["tp"]["mesh"] == expected_tp[rank]
        assert checks["dp2xpp1xcp1xtp2"]["dp"]["mesh"] == [rank % 2, rank % 2 + 2]
        assert checks["dp1xpp2xcp1xtp2"]["pp"]["mesh"] == [rank % 2, rank % 2 + 2]
        assert checks["dp2xpp1xcp2xtp1"]["dp+cp"]["mesh"] == [0, 1, 2, 3]


@pytest.mark.slow
def test_pairs_build_no_mesh():
    assert all(r["pair"]["mesh"] == {} for r in gloo_results())


def test_build_device_mesh_rejects_a_wrong_world_before_creating_groups():
    # This process has no group, or a one-rank one (another test's): either way
    # the check comes before init_device_mesh.
    match = "must equal the world size" if dist.is_initialized() else "initialised"
    with pytest.raises(ValueError, match=match):
        build_device_mesh(MeshLayout(dp=2))
    with pytest.raises(TypeError, match="MeshLayout"):
        build_device_mesh((2, 1, 1, 2))
