"""The alpha-beta-gamma cost model of collective algorithms, and their crossovers.

Hockney prices an n-byte message at alpha + n beta (latency plus bytes over bandwidth);
Thakur, Rabenseifner & Gropp (2005) add gamma per byte reduced and give each algorithm's
time as c_alpha alpha + c_beta n beta + c_gamma n gamma. Few steps win for small n
(recursive doubling, lg p), few bytes for large n (ring, Rabenseifner, 2(p-1)/p n);
where two cost the same is their *crossover*. Notation: n bytes per rank (nccl-tests'
size), p ranks, lg = log2. If p is not a power of two, recursive doubling and
Rabenseifner *fold* (MPICH): the p - 2^floor(lg p) extra ranks first hand their n bytes
to a partner (alpha + n beta + n gamma), then get the result back (alpha + n beta);
binomial trees take ceil(lg p) rounds. Measured times are reported in
:mod:`aiinfra.comm.results`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.report import Table


@dataclass(frozen=True)
class LinkModel:
    """One link in the alpha-beta-gamma model.

    Args:
        alpha: seconds per message (start-up latency), >= 0.
        beta: seconds per byte sent (1 / bandwidth), >= 0.
        gamma: seconds per byte reduced (1 / reduction throughput), >= 0.
        name: a short label for tables and figures.
    """

    alpha: float
    beta: float
    gamma: float = 0.0
    name: str = ""

    def __post_init__(self) -> None:
        for arg in ("alpha", "beta", "gamma"):
            checks.non_negative(arg, getattr(self, arg))


Link = LinkModel | str  # a model, or the name of a preset in LINKS

#: The links the book prices, the one table every module and page reads by name.
#: ``nvlink``, ``ib400``, ``ib100``: the communication chapter's illustrative round
#: numbers, not measurements: an NVLink-class link inside a node (1 us per message,
#: 200 GB/s per direction) and a 400 / 100 Gb/s NIC between nodes (5 us; 50 / 12.5
#: GB/s); gamma = 1 ps/B is a GPU adding two vectors from HBM at about 1 TB/s.
#: ``<gpu>-nvlink`` (``h100-nvlink``, ...): that GPU's own NVLink, half the
#: both-directions bandwidth of its datasheet (:data:`aiinfra.accelerators.GPUS`:
#: 450 GB/s each way for the H100's NVLink 4), with the same alpha and gamma; the
#: training chapter prices every intra-node collective on these. ``pcie5-x16``: a
#: GPU's host link, PCIe Gen5 x16, half the both-directions 128 GB/s of the H100
#: SXM datasheet; it carries copies, not collectives, so its alpha and gamma are
#: not modelled (0).
LINKS: dict[str, LinkModel] = {
    "nvlink": LinkModel(alpha=1e-6, beta=1 / 200e9, gamma=1e-12, name="nvlink"),
    "ib400": LinkModel(alpha=5e-6, beta=1 / 50e9, gamma=1e-12, name="ib400"),
    "ib100": LinkModel(alpha=5e-6, beta=1 / 12.5e9, gamma=1e-12, name="ib100"),
    "pcie5-x16": LinkModel(alpha=0.0, beta=2 / 128e9, name="pcie5-x16"),
}
for _gpu, _spec in GPUS.items():
    LINKS[f"{_gpu.lower()}-nvlink"] = LinkModel(
        alpha=1e-6,
        beta=2 / _spec.scale_up_bandwidth,  # both directions -> one
        gamma=1e-12,
        name=f"{_gpu.lower()}-nvlink",
    )


def get_link(link: Link) -> LinkModel:
    """Return ``link`` itself, or the preset of :data:`LINKS` that it names."""
    return (
        link
        if isinstance(link, LinkModel)
        else LINKS[checks.one_of("link", link, sorted(LINKS))]
    )


def _args(n: float, p: int, link: Link) -> tuple[float, float, float]:
    """Check n and p; return the link's (alpha, beta, gamma)."""
    checks.positive_int("p", p)
    checks.non_negative("n", n)
    link = get_link(link)
    return link.alpha, link.beta, link.gamma


def _fold(p: int) -> tuple[int, int, int]:
    """Return k = floor(lg p), q = 2^k ranks that run the algorithm, e = 1 if p > q."""
    k = p.bit_length() - 1
    return k, 2**k, int(p > 2**k)


def ring_all_reduce_time(n: float, p: int, link: Link) -> float:
    """Ring: p-1 reduce-scatter then p-1 all-gather steps of n/p bytes each."""
    a, b, g = _args(n, p, link)
    return 2 * (p - 1) * a + 2 * (p - 1) / p * n * b + (p - 1) / p * n * g


def recursive_doubling_all_reduce_time(n: float, p: int, link: Link) -> float:
    """Recursive doubling: lg p exchanges of all n bytes, plus the fold if needed."""
    a, b, g = _args(n, p, link)
    k, _, e = _fold(p)
    return e * (2 * a + 2 * n * b + n * g) + k * (a + n * b + n * g)


def rabenseifner_all_reduce_time(n: float, p: int, link: Link) -> float:
    """Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather."""
    a, b, g = _args(n, p, link)
    k, q, e = _fold(p)
    core = 2 * k * a + 2 * (q - 1) / q * n * b + (q - 1) / q * n * g
    return e * (2 * a + 2 * n * b + n * g) + core


def ring_reduce_scatter_time(n: float, p: int, link: Link) -> float:
    """Ring reduce-scatter of an n-byte input: p-1 steps of n/p bytes, each reduced."""
    a, b, g = _args(n, p, link)
    return (p - 1) * a + (p - 1) / p * n * (b + g)


def ring_all_gather_time(n: float, p: int, link: Link) -> float:
    """Ring all-gather into an n-byte output: p-1 steps of n/p bytes."""
    a, b, _ = _args(n, p, link)
    return (p - 1) * a + (p - 1) / p * n * b


def binomial_broadcast_time(n: float, p: int, link: Link) -> float:
    """Binomial tree broadcast: ceil(lg p) rounds that each send all n bytes."""
    a, b, _ = _args(n, p, link)
    return (p - 1).bit_length() * (a + n * b)  # (p-1).bit_length() == ceil(lg p)


def binomial_reduce_time(n: float, p: int, link: Link) -> float:
    """Binomial tree reduce: ceil(lg p) rounds that each send and reduce n bytes."""
    a, b, g = _args(n, p, link)
    return (p - 1).bit_length() * (a + n * b + n * g)


def pairwise_all_to_all_time(n: float, p: int, link: Link) -> float:
    """Pairwise exchange: p-1 steps, each sending one n/p-byte block to one peer."""
    a, b, _ = _args(n, p, link)
    return (p - 1) * (a + n / p * b)


def hierarchical_all_reduce_time(
    n: float,
    p: int,
    link: Link,
    local_size: int = 8,
    local_link: Link = "nvlink",
    rails: int | None = None,
) -> float:
    """Two-level all-reduce: the sum of its three phases' times.

    Ring reduce-scatter in each node of ``local_size`` ranks over ``local_link``,
    ring all-reduce of the n / local_size shard across the nodes over ``link``,
    ring all-gather in each node. The node has ``rails`` NICs of ``link`` (default:
    one per rank); its ``local_size`` ranks share them in the middle phase.

    Raises:
        ValueError: ``local_size`` or ``rails`` < 1, or ``local_size`` not a
            divisor of ``p``.
    """
    _args(n, p, link)
    checks.positive_int("local_size", local_size)
    checks.positive_int("rails", local_size if rails is None else rails)
    if p % local_size:
        raise ValueError(f"local_size ({local_size}) must divide p ({p})")
    net = get_link(link)  # a rank's share of its node's NICs: rails / local_size
    share = LinkModel(
        net.alpha, net.beta * local_size / (rails or local_size), net.gamma, net.name
    )
    intra = ring_reduce_scatter_time(n, local_size, local_link)
    inter = ring_all_reduce_time(n / local_size, p // local_size, share)
    return intra + inter + ring_all_gather_time(n, local_size, local_link)


# Each algorithm by the name of its implementation in :mod:`aiinfra.comm`.
Cost = Callable[[float, int, Link], float]
ALGORITHMS: dict[str, Cost] = {
    f.__name__.removesuffix("_time"): f
    for f in (
        ring_all_reduce_time,
        recursive_doubling_all_reduce_time,
        rabenseifner_all_reduce_time,
        ring_reduce_scatter_time,
        ring_all_gather_time,
        binomial_broadcast_time,
        binomial_reduce_time,
        pairwise_all_to_all_time,
    )
}


def crossover_size(
    alg_a: str | Cost,
    alg_b: str | Cost,
    p: int,
    link: Link,
    max_bytes: float = 2.0**50,
) -> float | None:
    """The message size in bytes at which two algorithms take the same time.

    Named algorithms are affine in n, t(n) = t(0) + c_beta n: the crossover is the
    closed form (t_b(0) - t_a(0)) / (c_beta,a - c_beta,b). A callable
    ``f(n, p, link)`` is bisected on a sign change of t_a - t_b in (0, max_bytes].

    Args:
        alg_a: a name from :data:`ALGORITHMS` or a cost callable.
        alg_b: the other algorithm, likewise.
        p: ranks, as for the cost functions.
        link: the link, as for the cost functions.
        max_bytes: the largest size searched.

    Returns:
        The crossover size in bytes, or None if they do not cross in (0, max_bytes].
    """
    fa, fb = (
        a if callable(a) else ALGORITHMS[checks.one_of(name, a, sorted(ALGORITHMS))]
        for name, a in (("alg_a", alg_a), ("alg_b", alg_b))
    )
    d = lambda n: fa(n, p, link) - fb(n, p, link)  # noqa: E731 - a one-line helper
    if isinstance(alg_a, str) and isinstance(alg_b, str):
        slope = (d(max_bytes) - d(0.0)) / max_bytes  # exact for affine costs
        x = -d(0.0) / slope if slope else 0.0  # rounding can leave parallel lines
        return x if 0 < x <= max_bytes else None  # a slope of ~1e-27: x ~ 1e21
    lo, hi = 0.0, 1.0
    while hi <= max_bytes and (d(lo) > 0) == (d(hi) > 0):
        lo, hi = hi, 2 * hi  # walk up by octaves to the first sign change
    if hi > max_bytes:
        return None
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if (d(mid) > 0) == (d(lo) > 0) else (lo, mid)
    return (lo + hi) / 2


def format_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary units, three significant digits."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


def cost_formula_table(
    p: int = 8, n: float = 16 * 2**20, link: Link = "nvlink"
) -> Table:
    """Each algorithm's latency and bandwidth terms at p, and their times at n, link.

    The coefficients of c_alpha alpha + c_beta n beta + c_gamma n gamma are read off the
    cost functions themselves, by pricing n = 1 byte on unit links.
    """
    link = get_link(link)
    unit = [LinkModel(1.0, 0.0), LinkModel(0.0, 1.0), LinkModel(0.0, 0.0, 1.0)]
    rows = []
    for name, f in ALGORITHMS.items():
        a, b, c = f(0.0, p, unit[0]), f(1.0, p, unit[1]), f(1.0, p, unit[2])
        bw = f"{b:.4g} n beta" + f" + {c:.4g} n gamma" * bool(c)
        t0, t = f(0.0, p, link) * 1e6, f(n, p, link) * 1e6  # us
        rows.append([name, f"{a:.4g} alpha", bw, t0, t - t0, t])
    return Table(
        ["algorithm", "latency term", "bandwidth term"]
        + ["latency (us)", "bandwidth (us)", "total (us)"],
        rows,
        note="The alpha-beta-gamma model of Thakur, Rabenseifner & Gropp (2005).",
        stamp="p = {p}, n = {n}, link {link}: alpha = {alpha} us, beta = {beta} "
        "ps/B, gamma = {gamma} ps/B",
        fields={
            "p": p,
            "n": format_bytes(n),
            "link": link.name,
            "alpha": f"{link.alpha * 1e6:g}",
            "beta": f"{link.beta * 1e12:g}",
            "gamma": f"{link.gamma * 1e12:g}",
        },
    )


def crossover_table(
    ps: tuple[int, ...] = (2, 4, 8, 16, 64, 256), link: Link = "nvlink"
) -> Table:
    """Sizes below which recursive doubling beats the ring and Rabenseifner."""
    rows = []
    for p in ps:
        ring, rab = (
            crossover_size("recursive_doubling_all_reduce", other, p, link)
            for other in ("ring_all_reduce", "rabenseifner_all_reduce")
        )
        rows.append([p] + [format_bytes(x) if x else "never" for x in (ring, rab)])
    return Table(
        ["p", "recursive doubling vs ring", "recursive doubling vs Rabenseifner"],
        rows,
        note="'never': they do not cross for n > 0.",
        stamp="link {link}",
        fields={"link": get_link(link).name},
    )
