"""HCCL's algorithms in the book's alpha-beta-gamma model, with HCCL's own formulas.

HCCL's algorithm pages price every step as alpha + n beta + n gamma (Hockney, as
:mod:`aiinfra.comm.cost`), with n bytes per rank and p ranks. For the all-reduce:

- Ring: 2(p-1) alpha + 2((p-1)/p) n beta + ((p-1)/p) n gamma.
- Mesh: 2 alpha + (2/p) n beta + ((p-1)/p) n gamma: two steps, each moving n/p
  bytes on each of p - 1 links at once (a full mesh, as inside an Atlas server).
- H-D_R (recursive halving-doubling): Rabenseifner's time, with the fold of
  :mod:`aiinfra.comm.cost` when p is not a power of two: 2 extra steps and 2n extra
  bytes, HCCL's (2 floor(lg p) + 2) alpha + (2 (p'-1)/p' + 2) n beta + ...
- NHR and NB: 2 ceil(lg p) alpha + 2((p-1)/p) n beta + ((p-1)/p) n gamma, for any p.

Ring and H-D_R are the book's functions themselves; Mesh, NHR and NB are new here.
The all-to-all's Pairwise is :func:`aiinfra.comm.cost.pairwise_all_to_all_time`.
"""

from __future__ import annotations

from aiinfra.comm import cost
from aiinfra.comm.cost import Cost, Link
from aiinfra.comm.hccl.schedules import step_count


def mesh_all_reduce_time(n: float, p: int, link: Link) -> float:
    """Mesh: a one-shot reduce-scatter and all-gather, p - 1 links in parallel."""
    a, b, g = cost._args(n, p, link)
    if p == 1:
        return 0.0
    return 2 * a + 2 * n / p * b + (p - 1) / p * n * g


def nhr_all_reduce_time(n: float, p: int, link: Link) -> float:
    """NHR: ceil(lg p) reduce-scatter and ceil(lg p) all-gather steps, p-1 slices."""
    a, b, g = cost._args(n, p, link)
    return 2 * step_count(p) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g


def nb_all_reduce_time(n: float, p: int, link: Link) -> float:
    """NB: the same steps and bytes as NHR (its mirror image)."""
    return nhr_all_reduce_time(n, p, link)


#: HCCL's all-reduce algorithms by their ``HCCL_ALGO`` names, priced.
ALL_REDUCE: dict[str, Cost] = {
    "ring": cost.ring_all_reduce_time,
    "Mesh": mesh_all_reduce_time,
    "H-D_R": cost.rabenseifner_all_reduce_time,
    "NHR": nhr_all_reduce_time,
    "NB": nb_all_reduce_time,
}


def fastest(n: float, p: int, link: Link, names: tuple[str, ...] = ()) -> str:
    """The cheapest of ``names`` (default: all of :data:`ALL_REDUCE`) at n, p, link.

    Ties go to the earlier name.

    Raises:
        ValueError: a name not in :data:`ALL_REDUCE`.
    """
    names = names or tuple(ALL_REDUCE)
    for name in names:
        if name not in ALL_REDUCE:
            raise ValueError(f"names must be among {sorted(ALL_REDUCE)}, got {name!r}")
    return min(names, key=lambda k: (ALL_REDUCE[k](n, p, link), names.index(k)))


def crossover_size_between(a: str, b: str, p: int, link: Link) -> float | None:
    """Size in bytes at which HCCL's all-reduces ``a`` and ``b`` cost the same.

    Both costs are affine in n, so this is the closed form of
    :func:`aiinfra.comm.cost.crossover_size`; ``None`` when they do not cross for
    n > 0.

    Raises:
        ValueError: a name not in :data:`ALL_REDUCE`.
    """
    for arg, name in (("a", a), ("b", b)):
        if name not in ALL_REDUCE:
            raise ValueError(f"{arg} must be among {sorted(ALL_REDUCE)}, got {name!r}")
    fa, fb = ALL_REDUCE[a], ALL_REDUCE[b]
    d0 = fa(0.0, p, link) - fb(0.0, p, link)
    slope = (fa(1.0, p, link) - fb(1.0, p, link)) - d0
    x = -d0 / slope if slope else 0.0
    return x if x > 1.0 else None  # below a byte: rounding of equal latencies
