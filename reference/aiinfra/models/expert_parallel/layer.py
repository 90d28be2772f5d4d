"""Expert parallelism: a MoE layer whose experts are spread over the ranks of a group.

GShard (Lepikhin et al. 2021, Sec. 2.2) keeps every other weight replicated and
places the ``E`` experts of a MoE layer on the ``p`` ranks of a group, ``E/p`` each,
so no rank stores more than its share of the experts' parameters. Each rank routes
its own ``T`` tokens with the replicated router, then runs four steps: *permute* the
kept token-expert assignments by expert (hence by destination rank), *dispatch*
their hidden vectors with an all-to-all of uneven splits, run the *local experts* on
what arrived, grouped by expert, and *combine*: the reverse all-to-all brings the
outputs home, where they are weighted by the router and summed per token. Only the
routed part changes, so the layer subclasses :class:`~aiinfra.models.moe.layer.MoELayer`
and overrides ``experts_output``. Gradients: an expert's gradient already sums the
contributions of every rank's tokens (they came back through the all-to-all's
backward); the replicated router and shared experts saw only this rank's tokens and
are all-reduced over the group, as in data parallelism. Notation: ``E`` experts,
``K`` per token, ``p`` ranks, ``T`` tokens of this rank, ``h`` hidden.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor, nn

from aiinfra.models.expert_parallel.comm import (
    AllToAllCounter,
    all_to_all,
    check_expert_split,
    dispatch_plan,
    exchange_counts,
)
from aiinfra.models.moe.balance import expert_load, update_expert_bias
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.routing import Routing


def group_by_local_expert(received: Tensor) -> tuple[Tensor, list[int]]:
    """Regroup the rows received from every rank by the local expert they are for.

    Rows arrive in blocks by source rank, each block sorted by expert; the experts
    want them the other way round.

    Args:
        received: ``(p, E/p)`` rows from rank j for local expert l.

    Returns:
        ``perm`` ``(S_in,)``, the received rows in expert-major order, and the rows
        of each local expert (``E/p`` counts).
    """
    n_local = received.shape[1]
    local = torch.arange(n_local, device=received.device).repeat(received.shape[0])
    expert_of_row = local.repeat_interleave(received.flatten())  # (S_in,)
    perm = expert_of_row.argsort(stable=True)  # (S_in,) grouped by expert
    return perm, received.sum(0).tolist()


class ExpertParallelMoE(MoELayer):
    """A :class:`~.moe.layer.MoELayer` holding this rank's ``E/p`` experts.

    The router, the expert bias and the shared experts are the layer's own
    (replicated on every rank); ``experts`` holds global experts
    ``[r E/p, (r + 1) E/p)`` of group rank r, ``first = r E/p``. With a capacity
    factor, each rank fills the experts' queues with its own tokens (GShard's
    per-group capacity), so it equals the layer run on each rank's tokens apart.

    Args:
        layer: the full layer; its modules are taken, not copied.
        group: the expert-parallel process group (``None``: the world).

    Raises:
        TypeError: ``layer`` is not a :class:`~aiinfra.models.moe.layer.MoELayer`.
        ValueError: the group size does not divide ``E`` (before any collective).
    """

    def __init__(self, layer: MoELayer, group: dist.ProcessGroup | None = None) -> None:
        if not isinstance(layer, MoELayer):
            raise TypeError(f"layer must be a MoELayer, got {type(layer).__name__}")
        nn.Module.__init__(self)  # take the layer's modules instead of new ones
        self.counter = AllToAllCounter(group)  # logs every collective of the layer
        per_rank = check_expert_split(layer.spec.n_experts, self.counter.world_size)
        self.d_model, self.spec = layer.d_model, layer.spec
        self.bias_update, self.last_routing = layer.bias_update, None
        self.router, self.shared = layer.router, layer.shared
        self.shared_gate = layer.shared_gate
        self.register_buffer("expert_bias", layer.expert_bias)
        self.first = self.counter.rank * per_rank
        self.experts = nn.ModuleList(layer.experts[self.first : self.first + per_rank])

    @classmethod
    def from_layer(
        cls, layer: MoELayer, group: dist.ProcessGroup | None = None
    ) -> ExpertParallelMoE:
        """The expert-parallel layer of ``layer`` on ``group`` (see the class)."""
        return cls(layer, group)

    def _local_experts(self, x: Tensor, received: Tensor) -> Tensor:
        """Run each local expert on its rows; ``x`` ``(S_in, h)`` as received."""
        perm, rows = group_by_local_expert(received)
        chunks = x[perm].split(rows)  # E/p chunks of (rows_l, h)
        y = torch.cat([e(c) for e, c in zip(self.experts, chunks, strict=True)])
        return y[perm.argsort()]  # (S_in, h), back in the order received

    def experts_output(self, x: Tensor, routing: Routing) -> Tensor:
        """``sum_k kept_k g_k FFN_{e_k}(x)``, the experts living on their ranks.

        Args:
            x: this rank's tokens ``(T, h)``.
            routing: their routing (by the replicated router).

        Returns:
            The routed output ``(T, h)``.
        """
        E, p = self.spec.n_experts, self.counter.world_size
        # region dispatch-combine
        plan = dispatch_plan(routing.experts, routing.kept, E, p)  # sorted by expert
        received = exchange_counts(plan.counts, self.counter)  # (p, E/p)
        recv = received.sum(1).tolist()  # rows from each rank
        x_in = all_to_all(x[plan.tokens], plan.send, recv, self.counter)  # (S_in, h)
        y_in = self._local_experts(x_in, received)  # (S_in, h)
        y = all_to_all(y_in, recv, plan.send, self.counter)  # (S, h), plan's order
        g = routing.weights.flatten()[plan.order].to(x.dtype)  # (S,) gate weights
        out = torch.zeros_like(x).index_add(0, plan.tokens, y * g[:, None])  # (T, h)
        # endregion
        return out

    def forward(self, x: Tensor) -> Tensor:
        """:meth:`MoELayer.forward` on this rank's tokens ``(..., h)``.

        DeepSeek-V3's bias update (``bias_update > 0``, training) counts the load
        over the whole group (one all-reduce of ``E`` counts), so the replicated
        bias stays the same on every rank.
        """
        gamma, self.bias_update = self.bias_update, 0.0  # the update is done here
        try:
            y = super().forward(x)
        finally:
            self.bias_update = gamma
        if self.training and gamma > 0:
            load = expert_load(self.last_routing.experts, self.spec.n_experts)
            self.counter.all_reduce(load)  # (E,) the group's load
            update_expert_bias(self.expert_bias, load, gamma)
        return y

    def replicated_parameters(self) -> list[nn.Parameter]:
        """The parameters every rank of the group holds: router, shared experts."""
        local = {id(q) for q in self.experts.parameters()}
        return [q for q in self.parameters() if id(q) not in local]

    def sync_gradients(self, dp_group: dist.ProcessGroup | None = None) -> None:
        """Sum the gradients over the ranks that hold the same parameter.

        Each rank saw only its own tokens, so the replicated router and shared
        experts hold a partial gradient: it is summed over the expert-parallel
        group (logged by ``counter``). An expert's gradient is already complete
        within that group. With data parallelism on top (a second mesh dimension
        holding replicas of the whole group), every gradient is then summed over
        ``dp_group`` too: the replicated ones thus over both dimensions.

        Args:
            dp_group: this rank's data-parallel group, or ``None``.
        """
        # region sync (to the end)
        for q in self.replicated_parameters():
            if q.grad is not None:
                self.counter.all_reduce(q.grad)
        if dp_group is not None:
            for q in self.parameters():
                if q.grad is not None:
                    dist.all_reduce(q.grad, group=dp_group)
