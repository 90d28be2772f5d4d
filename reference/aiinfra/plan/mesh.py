"""The device mesh: which ranks form each data, pipeline, context and tensor group.

A job on ``dp x pp x cp x tp`` GPUs gives every rank one coordinate per dimension;
the ranks that differ in one coordinate only form that dimension's group. The order
decides which groups share a node. Llama 3 (Dubey et al. 2024, Sec. 3.3.2, Fig. 5)
orders the dimensions [TP, CP, PP, DP] from the innermost: the tensor-parallel
group, which all-reduces activations four times per layer, takes consecutive ranks
and so stays inside one NVLink node; the data-parallel group, which communicates
once per step and can overlap it, is outermost and crosses the network. With the
dimensions written outermost first, rank ``r = ((d pp + q) cp + c) tp + t``. The
ZeRO/FSDP shard group is the data-parallel group joined with the context-parallel
one (``("dp", "cp")``): the CP ranks hold the same weights and see different
tokens, so their gradients are reduced, and their optimizer states sharded,
together (Megatron-LM's data-parallel group with context parallelism). The layout is
pure arithmetic; :func:`build_device_mesh` asks
``torch.distributed.device_mesh.init_device_mesh`` for the same grid, and the tests
check that its groups are these.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiinfra import checks

MESH_DIMS = ("dp", "pp", "cp", "tp")  # outermost first: tp varies fastest


def _dims(dims: str | tuple[str, ...]) -> tuple[str, ...]:
    """One dimension name or several, as a tuple of known names."""
    dims = (dims,) if isinstance(dims, str) else tuple(dims)
    if not dims or any(d not in MESH_DIMS for d in dims):
        raise ValueError(f"dims must be among {MESH_DIMS}, got {dims!r}")
    return dims


@dataclass(frozen=True)
class MeshLayout:
    """Sizes of the four dimensions and the GPUs of one node.

    Args:
        dp: data-parallel ranks N_d (outermost).
        pp: pipeline stages.
        cp: context-parallel ranks (sequence shards).
        tp: tensor-parallel ranks (innermost: consecutive ranks).
        gpus_per_node: GPUs that share one NVLink domain.

    Raises:
        ValueError: a size is not a positive int, ``tp`` does not divide
            ``gpus_per_node`` (a TP group would straddle two nodes), or the world
            is larger than a node and not a whole number of nodes.
    """

    dp: int = 1
    pp: int = 1
    cp: int = 1
    tp: int = 1
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        for name in (*MESH_DIMS, "gpus_per_node"):
            checks.positive_int(name, getattr(self, name))
        if self.gpus_per_node % self.tp:
            raise ValueError(
                f"tp = {self.tp} must divide gpus_per_node = {self.gpus_per_node}: "
                "a tensor-parallel group must lie within one node"
            )
        if (
            self.world_size > self.gpus_per_node
            and self.world_size % self.gpus_per_node
        ):
            raise ValueError(
                f"dp * pp * cp * tp = {self.world_size} must be a multiple of "
                f"gpus_per_node = {self.gpus_per_node} (whole nodes)"
            )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(dp, pp, cp, tp)``, the order of :data:`MESH_DIMS`."""
        return (self.dp, self.pp, self.cp, self.tp)

    @property
    def world_size(self) -> int:
        """Ranks in the mesh, ``dp pp cp tp``."""
        return math.prod(self.shape)

    def _stride(self, dim: str) -> int:
        """Rank distance between neighbours of ``dim``: the product of inner sizes."""
        return math.prod(self.shape[MESH_DIMS.index(dim) + 1 :])

    def coordinate(self, rank: int) -> dict[str, int]:
        """``{dim: index}`` of a rank: its position along each dimension."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank must be in [0, {self.world_size}), got {rank!r}")
        return {
            d: rank // self._stride(d) % size
            for d, size in zip(MESH_DIMS, self.shape, strict=True)
        }

    def rank(self, **coordinate: int) -> int:
        """The rank at a coordinate, ``((d pp + q) cp + c) tp + t``; missing dims: 0."""
        unknown = set(coordinate) - set(MESH_DIMS)
        if unknown:
            raise ValueError(
                f"dimensions must be among {MESH_DIMS}, got {sorted(unknown)}"
            )
        return sum(coordinate.get(d, 0) * self._stride(d) for d in MESH_DIMS)

    def group_of(self, rank: int, dims: str | tuple[str, ...]) -> list[int]:
        """The ranks sharing every coordinate of ``rank`` except those of ``dims``.

        Args:
            rank: a rank of the mesh.
            dims: one dimension (``"tp"``) or several (``("dp", "cp")``: the
                ZeRO/FSDP shard group), in any order.

        Returns:
            The group's ranks, ascending (outer dimensions vary slowest).
        """
        dims = _dims(dims)
        base = self.coordinate(rank)
        group = [0]
        for d in MESH_DIMS:  # outermost first, so the list comes out sorted
            step = self._stride(d)
            if d in dims:
                group = [g + i * step for g in group for i in range(getattr(self, d))]
            else:
                group = [g + base[d] * step for g in group]
        return sorted(group)

    def _bases(self, dims: tuple[str, ...]) -> list[int]:
        """The smallest rank of each group of ``dims``: those at index 0 there."""
        bases = [0]
        for d in MESH_DIMS:
            if d not in dims:
                step = self._stride(d)
                bases = [b + i * step for b in bases for i in range(getattr(self, d))]
        return sorted(bases)

    def groups(self, dims: str | tuple[str, ...]) -> list[list[int]]:
        """Every group of ``dims``, each once, ordered by its smallest rank."""
        dims = _dims(dims)
        return [self.group_of(r, dims) for r in self._bases(dims)]

    def crosses_nodes(self, dims: str | tuple[str, ...]) -> bool:
        """Whether some group of ``dims`` holds ranks of two nodes.

        A group runs from its smallest rank ``r`` to ``r + span``, span =
        sum (size - 1) stride over ``dims``; it crosses a node boundary when
        ``r mod g + span >= g`` (g GPUs per node), so only the residues of the
        smallest ranks modulo g matter (at most g of them).
        """
        dims = _dims(dims)
        g = self.gpus_per_node
        span = sum((getattr(self, d) - 1) * self._stride(d) for d in dims)
        residues = {0}
        for d in MESH_DIMS:
            if d not in dims:
                step, size = self._stride(d), getattr(self, d)
                residues = {(x + i * step) % g for x in residues for i in range(size)}
        return max(residues) + span >= g


def mesh_layout(
    world_size: int,
    dp: int = 1,
    pp: int = 1,
    cp: int = 1,
    tp: int = 1,
    gpus_per_node: int = 8,
) -> MeshLayout:
    """Check a job's sizes against its world and return the layout.

    Args:
        world_size: GPUs of the job.
        dp: data-parallel ranks.
        pp: pipeline stages.
        cp: context-parallel ranks.
        tp: tensor-parallel ranks.
        gpus_per_node: GPUs per node.

    Returns:
        The layout, ``dp pp cp tp == world_size``.

    Raises:
        ValueError: as :class:`MeshLayout`, or ``dp pp cp tp != world_size``.
    """
    checks.positive_int("world_size", world_size)
    layout = MeshLayout(dp, pp, cp, tp, gpus_per_node)
    if layout.world_size != world_size:
        raise ValueError(
            f"dp * pp * cp * tp = {dp} * {pp} * {cp} * {tp} = {layout.world_size} "
            f"must equal world_size = {world_size}"
        )
    return layout
