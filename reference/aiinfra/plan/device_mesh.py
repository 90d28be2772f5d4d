"""The layout of :mod:`aiinfra.plan.mesh` as a ``torch`` ``DeviceMesh``.

``torch.distributed.device_mesh.init_device_mesh(device_type, shape,
mesh_dim_names=...)`` arranges the world's ranks row-major in ``shape`` (the last
dimension varies fastest) and creates one process group per dimension; slicing the
mesh by names (``mesh["dp", "cp"]``) gives a sub-mesh over several dimensions.
Given :data:`~aiinfra.plan.mesh.MESH_DIMS` outermost first, its groups are those of
:class:`~aiinfra.plan.mesh.MeshLayout`: the tests check it on gloo ranks, rank by
rank and with a collective over each group. Tensor, pipeline and context parallel
code then takes ``mesh.get_group("tp")`` (and the others) as its ``group``.
"""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from aiinfra.distributed import rank_device
from aiinfra.plan.mesh import MESH_DIMS, MeshLayout


def build_device_mesh(layout: MeshLayout, device_type: str | None = None) -> DeviceMesh:
    """Create the ``("dp", "pp", "cp", "tp")`` device mesh of ``layout``.

    Every rank of the world must call it (it creates process groups).

    Args:
        layout: the sizes; their product must be the world size.
        device_type: ``"cpu"`` or ``"cuda"``; ``None``: the type of
            :func:`~aiinfra.distributed.rank_device` (CUDA under NCCL).

    Returns:
        The mesh, with ``mesh_dim_names = MESH_DIMS``.

    Raises:
        TypeError: ``layout`` is not a :class:`MeshLayout`.
        ValueError: no process group is initialised, or the layout's world size
            is not the world's (checked before any group is created).
    """
    if not isinstance(layout, MeshLayout):
        raise TypeError(f"layout must be a MeshLayout, got {type(layout).__name__}")
    if not dist.is_initialized():
        raise ValueError("build_device_mesh needs an initialised process group")
    if layout.world_size != dist.get_world_size():
        raise ValueError(
            f"layout.world_size = {layout.world_size} must equal the world size "
            f"{dist.get_world_size()}"
        )
    device_type = device_type or rank_device().type
    return init_device_mesh(device_type, layout.shape, mesh_dim_names=MESH_DIMS)


def mesh_group_ranks(mesh: DeviceMesh, dims: str | tuple[str, ...]) -> list[int]:
    """The global ranks of this rank's group of ``dims`` in ``mesh``, ascending.

    Args:
        mesh: a mesh from :func:`build_device_mesh`.
        dims: one dimension name (its process group's ranks) or several, in mesh
            order (the ranks of the sub-mesh ``mesh[dims]``).

    Returns:
        Global ranks.
    """
    if isinstance(dims, str):
        return sorted(dist.get_process_group_ranks(mesh.get_group(dims)))
    return sorted(mesh[dims].mesh.flatten().tolist())
