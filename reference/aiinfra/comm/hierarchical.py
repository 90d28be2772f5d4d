"""Hierarchical all-reduce: reduce-scatter inside a node, all-reduce across, all-gather.

A cluster has two kinds of links: fast ones inside a node (NVLink) and slower ones
between nodes (InfiniBand, Ethernet). With N nodes of p_node ranks, p = N p_node, the
hierarchical all-reduce of Mikami et al. (2018, "2D-torus all-reduce") runs in three
phases: (1) a ring reduce-scatter among the p_node ranks of each node leaves local rank
j with shard j of the node's sum; (2) the N ranks that share local rank j, one per node,
all-reduce that shard with a ring; (3) a ring all-gather inside each node puts the
shards back together. Only phase 2 crosses nodes, and each rank sends just
2((N-1)/N)(n/p_node) elements there: the inter-node traffic shrinks p_node-fold and the
p_node links of a node work in parallel. Time: the ring formulas with (p_node, n) inside
and (N, n/p_node) across. Notation: p_node = ``local_size``, N = number of nodes, j
local rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist
from torch import Tensor

from aiinfra.comm._validate import (
    check_same_on_all_ranks,
    check_tensor,
    group_rank_and_size,
    resolve_op,
)
from aiinfra.comm.ring import (
    ring_all_gather_chunks,
    ring_all_reduce,
    ring_reduce_scatter_chunks,
)


@dataclass(frozen=True)
class Hierarchy:
    """This rank's place in a grid of N nodes x p_node ranks, with the two sub-groups.

    Group ranks [0, p_node) form node 0, [p_node, 2 p_node) node 1, and so on. Build it
    with :meth:`create`, once, and reuse it: creating process groups is slow.

    Attributes:
        local_size: p_node, ranks per node.
        num_nodes: N = p / p_node.
        local_rank: j = r mod p_node, this rank's index inside its node.
        node_rank: r // p_node, the index of this rank's node.
        intra_group: the p_node ranks of this node, ordered by local rank.
        inter_group: the N ranks with local rank j, one per node, ordered by node.
        group: the parent group; ``None`` means the world.
    """

    local_size: int
    num_nodes: int
    local_rank: int
    node_rank: int
    intra_group: dist.ProcessGroup
    inter_group: dist.ProcessGroup
    group: dist.ProcessGroup | None = None

    @classmethod
    def create(
        cls, local_size: int, group: dist.ProcessGroup | None = None
    ) -> Hierarchy:
        """Split ``group`` into nodes of ``local_size`` ranks; a collective call.

        Every rank of ``group`` must call it, with the same ``local_size``, at the same
        point of its program (it calls ``dist.new_group`` N + p_node times). When
        ``group`` is a sub-group, ranks outside it do not call it: the new groups are
        then created with ``use_local_synchronization=True``, which names a group by
        its rank list, so create at most one such hierarchy per parent group.

        Args:
            local_size: p_node, ranks per node, >= 1 and dividing the group size p.
            group: the parent group; ``None`` means the world.

        Returns:
            This rank's :class:`Hierarchy`.

        Raises:
            ValueError: ``local_size`` is not an int >= 1 dividing p; this rank is
                not in ``group``.
        """
        r, p = group_rank_and_size(group)
        ok = isinstance(local_size, int) and not isinstance(local_size, bool)
        if not ok or local_size < 1 or p % local_size != 0:
            raise ValueError(
                f"local_size must be an int >= 1 dividing the group size {p}, "
                f"got {local_size!r}"
            )
        ranks = list(range(p)) if group is None else dist.get_process_group_ranks(group)
        num_nodes = p // local_size
        node_rank, local_rank = divmod(r, local_size)

        def new_group(members: list[int]) -> dist.ProcessGroup | None:
            # sort_ranks=False keeps the parent's order: rank in the new group equals
            # local rank (intra) or node rank (inter).
            return dist.new_group(
                members, use_local_synchronization=group is not None, sort_ranks=False
            )

        # Every rank creates every sub-group in the same order, as new_group requires.
        intra = [
            new_group(ranks[i * local_size : (i + 1) * local_size])
            for i in range(num_nodes)
        ]
        inter = [new_group(ranks[i::local_size]) for i in range(local_size)]
        return cls(
            local_size=local_size,
            num_nodes=num_nodes,
            local_rank=local_rank,
            node_rank=node_rank,
            intra_group=intra[node_rank],
            inter_group=inter[local_rank],
            group=group,
        )


def hierarchical_all_reduce(
    tensor: Tensor,
    hierarchy: Hierarchy,
    op: str | dist.ReduceOp = "sum",
    *,
    check_consistency: bool = True,
) -> None:
    """All-reduce ``tensor`` in place over ``hierarchy.group`` in three ring phases.

    Args:
        tensor: contiguous tensor of any shape and numel >= 1; on return it holds the
            reduction over all p ranks, identical on each.
        hierarchy: this rank's :class:`Hierarchy`, from :meth:`Hierarchy.create`.
        op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or the ``dist.ReduceOp``.
        check_consistency: first exchange (numel, dtype, op) over the whole group so
            that a mismatch between ranks raises on every rank instead of hanging.

    Raises:
        TypeError: ``tensor`` is not a tensor or has an unsupported dtype;
            ``hierarchy`` is not a :class:`Hierarchy`.
        ValueError: an unsupported ``op``; an empty or non-contiguous ``tensor``;
            numel, dtype or op differing across ranks.
    """
    op = resolve_op(op)
    check_tensor(tensor, "tensor")
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(
            f"hierarchy must be a Hierarchy, got {type(hierarchy).__name__}"
        )
    if check_consistency:
        fields = {"tensor.numel()": tensor.numel(), "tensor.dtype": tensor.dtype}
        check_same_on_all_ranks({**fields, "op": op}, hierarchy.group, tensor.device)
    h = hierarchy
    chunks = tensor.view(-1).tensor_split(h.local_size)  # p_node shards of ~n/p_node
    # region three-phases
    shard = ring_reduce_scatter_chunks(chunks, op, h.intra_group)  # 1. inside node
    if shard.numel() > 0:  # n < p_node leaves some shards empty, on every node alike
        ring_all_reduce(shard, op, h.inter_group, check_consistency=False)  # 2. across
    chunks[h.local_rank].copy_(shard)
    ring_all_gather_chunks(chunks, h.intra_group)  # 3. inside node
    # endregion
