"""What expert parallelism sends, and how long the all-to-all takes: a cost model.

One dispatch sends, from each rank, the hidden vectors of the token-expert
assignments whose expert lives on another rank; the combine sends as many back.
Under uniform routing a fraction ``(p-1)/p`` of the ``T K`` assignments leave, so
each all-to-all moves ``T K (p-1)/p h w`` bytes per rank (``w`` bytes per element),
and a training step runs four of them (dispatch and combine, forward and
backward). Across nodes the all-to-all is priced by the alpha-beta model of
:mod:`aiinfra.comm.cost`: blocks to ranks of the same node cross NVLink, the rest a
NIC. DeepSeek-V3 (Sec. 3.2.2) sends a token at most once to each node it routes to
and limits that to ``M = 4`` nodes (node-limited routing, Sec. 2.1.2); the expected
copies per token are simulated here with the package's own router on random scores.
Notation: ``T`` tokens per rank, ``K`` experts per token, ``E`` experts, ``p`` ranks,
``h`` hidden, ``N`` nodes, ``M`` nodes a token may reach.
"""

from __future__ import annotations

import torch
from torch import nn

from aiinfra import checks
from aiinfra.comm.cost import Link, pairwise_all_to_all_time
from aiinfra.models.moe.layer import MoELayer
from aiinfra.models.moe.spec import MoESpec


def dispatch_bytes(
    tokens: int, top_k: int, d_model: int, ep_size: int, element_bytes: int = 2
) -> float:
    """Bytes one rank sends in one dispatch (or combine) under uniform routing.

    Args:
        tokens: ``T``, tokens of the rank.
        top_k: ``K``, experts per token.
        d_model: ``h``.
        ep_size: ``p``, ranks of the expert-parallel group.
        element_bytes: ``w``, bytes per element (2 for bf16, 1 for FP8).

    Returns:
        ``T K (p-1)/p h w``.

    Raises:
        ValueError: an argument is not > 0.
    """
    checks.positives(
        tokens=tokens,
        top_k=top_k,
        d_model=d_model,
        ep_size=ep_size,
        element_bytes=element_bytes,
    )
    return tokens * top_k * (ep_size - 1) / ep_size * d_model * element_bytes


def ep_all_to_all_time(
    n: float,
    p: int,
    local_size: int = 8,
    local_link: Link = "h100-nvlink",
    link: Link = "ib400",
) -> float:
    """Pairwise all-to-all of ``n`` bytes per rank over nodes of ``local_size``.

    Each rank sends ``n/p`` bytes to every other rank, one peer per step: its
    ``min(p, local_size) - 1`` node mates over ``local_link``, the other
    ``p - local_size`` ranks (if any) through its own NIC, ``link``.

    Args:
        n: bytes per rank (its whole input, own block included).
        p: ranks of the group.
        local_size: ranks per node.
        local_link: the link inside a node (a :data:`~aiinfra.comm.cost.LINKS`
            name): by default the H100's NVLink, 450 GB/s each way, as the
            training chapter prices it.
        link: the link between nodes.

    Returns:
        Seconds.

    Raises:
        ValueError: ``p`` or ``local_size`` < 1, ``n`` < 0, or ``local_size`` does
            not divide ``p`` when ``p > local_size``.
    """
    checks.positive_int("local_size", local_size)
    if p > local_size and p % local_size:
        raise ValueError(f"local_size ({local_size}) must divide p ({p}) across nodes")
    inside = min(p, local_size)  # ranks of this node in the group
    # The pairwise model prices (q - 1) steps of n/q bytes; scale to n/p per step.
    intra = pairwise_all_to_all_time(n * inside / p, inside, local_link)
    remote = p - inside
    if remote == 0:
        return intra
    inter = pairwise_all_to_all_time(n * (remote + 1) / p, remote + 1, link)
    return intra + inter


class _RouterOnly(MoELayer):
    """A :class:`MoELayer` without experts whose logits are its input (``h = E``)."""

    def __init__(self, spec: MoESpec) -> None:
        nn.Module.__init__(self)  # no experts: only the routing is simulated
        self.d_model, self.spec = spec.n_experts, spec
        self.router = nn.Linear(spec.n_experts, spec.n_experts, bias=False)
        self.router.weight = nn.Parameter(torch.eye(spec.n_experts))  # W_r = I
        self.register_buffer("expert_bias", torch.zeros(spec.n_experts))


def nodes_reached(
    spec: MoESpec,
    n_nodes: int,
    tokens: int = 4096,
    generator: torch.Generator | None = None,
) -> dict[str, float]:
    """Copies of a token that leave its node, by simulation with random scores.

    The experts are placed on ``n_nodes`` nodes contiguously (a node per expert
    group when ``spec.n_groups == n_nodes``); each token lives on a random node and
    is routed by :meth:`~aiinfra.models.moe.layer.MoELayer.route` on Gaussian logits.

    Args:
        spec: the routing; its ``topk_groups`` limits the nodes when its groups
            are the nodes.
        n_nodes: ``N``, which must divide ``E``.
        tokens: tokens simulated.
        generator: for the logits and the tokens' nodes.

    Returns:
        Means per token: ``"nodes"`` reached, ``"remote experts"`` (copies sent
        one per expert), ``"remote nodes"`` (one copy per remote node, as
        DeepSeek-V3's dispatch sends); and ``"max nodes"`` over the tokens.

    Raises:
        ValueError: ``n_nodes`` does not divide ``E``, or ``tokens`` < 1.
    """
    E = spec.n_experts
    checks.positive_int("n_nodes", n_nodes)
    if E % n_nodes:
        raise ValueError(f"n_nodes ({n_nodes}) must divide n_experts ({E})")
    checks.positive_int("tokens", tokens)
    layer = _RouterOnly(spec)
    logits = torch.randn(tokens, E, generator=generator)  # (T, E)
    with torch.no_grad():
        experts = layer.route(logits).experts  # (T, K)
    node = experts // (E // n_nodes)  # (T, K)
    home = torch.randint(n_nodes, (tokens, 1), generator=generator)  # (T, 1)
    hit = torch.zeros(tokens, n_nodes, dtype=torch.bool).scatter_(1, node, True)
    remote_nodes = hit.sum(1) - hit.gather(1, home).squeeze(1).long()  # (T,)
    return {
        "nodes": hit.sum(1).double().mean().item(),
        "remote experts": (node != home).sum(1).double().mean().item(),
        "remote nodes": remote_nodes.double().mean().item(),
        "max nodes": int(hit.sum(1).max()),
    }
