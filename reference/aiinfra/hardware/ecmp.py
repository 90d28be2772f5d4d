"""ECMP: flows hashed onto equal-cost uplinks, and what their collisions cost.

A switch with ``n`` equal-cost uplinks toward a destination (a leaf's spines) picks
one per *flow* by hashing its header fields (ECMP), so every packet of a flow takes
the same path and arrives in order. An RDMA collective has few flows, each large
and long: ``k`` flows hashed onto ``n`` uplinks land as balls in bins, and the
collective finishes when the busiest uplink does. With ``k = n`` the busiest uplink
expects well over one flow, so the full bisection that the fabric has is not what
its flows get. Three remedies: more flows per connection (several queue pairs, each
a flow that carries ``1/q`` of the bytes; Meta's Llama 3 cluster runs 16 per GPU
pair and hashes on more header fields, its E-ECMP, Gangidi et al. 2024), flowlet or
adaptive routing, which sends each piece to the least-loaded uplink, and
rail-optimised placement, which keeps most traffic off the spine altogether.

Notation: ``k`` flows, ``n`` uplinks, ``q`` queue pairs (flows) per connection;
loads are counted in flows; a uniform random hash.
"""

from __future__ import annotations

import random

import numpy as np

from aiinfra import checks


def _fill_matrices(flows: int, links: int) -> list[np.ndarray]:
    """One matrix per link: ``M[l][f, g]``, the chance of ``f - g`` flows on it.

    Link ``l`` of ``l`` left takes ``f - g`` of the ``f`` flows left, a binomial
    ``B(f, 1/l)``; zero above the diagonal.
    """
    f = np.arange(flows + 1)[:, None]
    g = np.arange(flows + 1)[None, :]
    j = f - g  # flows this link takes
    ok = j >= 0
    jj, gg = np.where(ok, j, 0), np.where(ok, g, 0)
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, flows + 1)))])
    log_comb = log_fact[f] - log_fact[jj] - log_fact[gg]
    out = []
    for left in range(1, links + 1):
        p = 1.0 / left
        if left == 1:  # the last link takes every flow left
            out.append((j == f).astype(float) * ok)
            continue
        logp = log_comb + jj * np.log(p) + gg * np.log1p(-p)
        out.append(np.exp(np.where(ok, logp, -np.inf)))
    return out


def _prob_all_at_most(flows: int, matrices: list[np.ndarray], cap: int) -> float:
    """Probability that no link gets more than ``cap`` of ``flows`` uniform flows.

    Links are filled one at a time: of the ``f`` flows left for ``l`` links, link
    ``l`` takes ``j`` with the binomial ``B(f, 1/l)``, here only ``j <= cap``.
    """
    f = np.arange(flows + 1)
    band = (f[:, None] - f[None, :]) <= cap
    ways = (f == 0).astype(float)  # no link left: only zero flows left is whole
    for matrix in matrices:
        ways = (matrix * band) @ ways
    return float(ways[flows])


def expected_max_load(flows: int, links: int) -> float:
    """Expected flows on the busiest of ``links`` uplinks when ``flows`` are hashed.

    Exact up to rounding: ``E[max] = sum over m >= 1 of P(max >= m)``, each term
    counted by :func:`_prob_all_at_most` (no sampling), stopped once the terms
    fall below 1e-13.

    Args:
        flows: ``k``, flows hashed, >= 1.
        links: ``n``, equal-cost uplinks, >= 1.

    Returns:
        ``E[max load]``, in flows (between ``ceil(k/n)`` and ``k``).

    Raises:
        TypeError: a count not an int.
        ValueError: a count < 1.
    """
    checks.positive_int("flows", flows)
    checks.positive_int("links", links)
    matrices = _fill_matrices(flows, links)
    sure = -(-flows // links)  # some link always gets ceil(k/n)
    total = float(sure)
    for m in range(sure + 1, flows + 1):
        tail = 1.0 - _prob_all_at_most(flows, matrices, m - 1)
        total += tail
        if tail < 1e-13:
            break
    return total


def ecmp_efficiency(connections: int, links: int, queue_pairs: int = 1) -> float:
    """Share of ``links`` uplinks' capacity a synchronous transfer gets under ECMP.

    ``connections`` equal transfers each split over ``queue_pairs`` flows are hashed
    onto the uplinks; the transfer ends when the busiest uplink has sent its flows,
    so it takes ``E[max load] / q`` flow-times against ``k / n`` with perfect
    balance (what adaptive routing or packet spraying approaches).

    Args:
        connections: ``k``, transfers crossing the uplinks at once, >= 1.
        links: ``n``, equal-cost uplinks, >= 1.
        queue_pairs: ``q``, flows per transfer, >= 1.

    Returns:
        ``(k / n) / (E[max load of k q flows] / q)``, at most 1 (``k >= n``).

    Raises:
        TypeError: a count not an int.
        ValueError: a count < 1.
    """
    checks.positive_int("connections", connections)
    checks.positive_int("links", links)
    checks.positive_int("queue_pairs", queue_pairs)
    ideal = max(connections / links, 1.0 / queue_pairs)  # one flow is indivisible
    return ideal / (expected_max_load(connections * queue_pairs, links) / queue_pairs)


def hash_flows(flows: int, links: int, seed: int = 0) -> list[int]:
    """The uplink of each of ``flows`` flows under one uniform hash (seeded).

    Raises:
        TypeError: a count or the seed not an int.
        ValueError: a count < 1.
    """
    checks.positive_int("flows", flows)
    checks.positive_int("links", links)
    checks.integer("seed", seed)
    rng = random.Random(seed)
    return [rng.randrange(links) for _ in range(flows)]


def loads(uplinks: list[int], links: int) -> list[int]:
    """Flows per uplink of an assignment such as :func:`hash_flows` returns."""
    counts = [0] * links
    for u in uplinks:
        counts[u] += 1
    return counts
