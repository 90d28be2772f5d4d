"""When data parallelism's all-reduce hides behind backward, and how big a bucket is.

Backward of a dense model costs about 4 Psi FLOPs per token (twice forward's 2 Psi:
one matrix multiply for the input's gradient, one for the weight's; Kaplan et al.
2020), and a ring all-reduce of the 16-bit gradients sends 2 (N_d - 1) / N_d x 2 Psi
bytes per rank (Thakur et al. 2005). Psi cancels: the all-reduce fits inside the
backward pass when each GPU processes at least

    tau* = (N_d - 1) / N_d x (w_g / 2) x F beta

tokens per step, F the GPU's FLOP/s, beta the link's seconds per byte per direction
(1 / bandwidth) and w_g the bytes of a gradient element. Below tau* the step is
communication-bound whatever the bucketing. Buckets trade the other way: each
all-reduce of n bytes pays 2 (p - 1) alpha of latency, a share f of its time once
n >= p alpha (1 - f) / (f beta).
The hardware is NVIDIA's H100 SXM (its peak from the book's GPU table,
:data:`aiinfra.accelerators.GPUS`; NVLink 4 at 900 GB/s both directions, so
450 GB/s each way) and a 400 Gb/s NIC per GPU; the
per-message latencies alpha are the communication chapter's cost model
(:data:`aiinfra.comm.cost.LINKS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from matplotlib.figure import Figure

from aiinfra import checks
from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import LINKS, LinkModel, ring_all_reduce_time


@dataclass(frozen=True)
class Link:
    """One GPU's way to its data-parallel peers.

    Attributes:
        name: a label.
        flops: F, the GPU's peak dense BF16 FLOP/s.
        bandwidth: 1 / beta, bytes per second in each direction.
        alpha: latency of one message, seconds.
    """

    name: str
    flops: float
    bandwidth: float
    alpha: float


H100_BF16_FLOPS = GPUS["H100"].bf16_flops  # dense, the book's GPU spec table
H100_LINKS = {  # the links of the one table, :data:`aiinfra.comm.cost.LINKS`
    key: Link(name, H100_BF16_FLOPS, 1 / LINKS[link].beta, LINKS[link].alpha)
    for key, name, link in (
        ("nvlink", "H100, NVLink 4", "h100-nvlink"),
        ("nic400", "H100, one 400G NIC", "ib400"),
    )
}


def overlap_tokens(link: Link, n_ranks: int, grad_bytes: int = 2) -> float:
    """tau*: tokens per GPU in the backward the all-reduce overlaps, at equal times.

    Without accumulation that backward is the step's; under ``no_sync()`` with k
    micro-batches the all-reduce starts only in the last micro-batch's backward,
    so tau counts one micro-batch's tokens per replica
    (:func:`overlap_tokens_per_step`).

    Args:
        link: the GPU and its link.
        n_ranks: N_d, data-parallel ranks in the ring.
        grad_bytes: w_g, bytes per gradient element (2 for bf16).

    Returns:
        (N_d - 1) / N_d x (w_g / 2) x F beta tokens.

    Raises:
        ValueError: ``n_ranks`` < 2 or ``grad_bytes`` not positive.
    """
    checks.integer("n_ranks", n_ranks, low=2)
    checks.positives(grad_bytes=grad_bytes)
    # region bound
    backward_flops_per_token = 4  # x Psi: twice forward's 2 Psi
    ring_bytes = 2 * (n_ranks - 1) / n_ranks * grad_bytes  # x Psi, per rank
    # 4 Psi tau / F = ring_bytes Psi beta  <=>  tau = ring_bytes F beta / 4
    t_star = ring_bytes * link.flops / (backward_flops_per_token * link.bandwidth)
    # endregion
    return t_star


def overlap_tokens_per_step(
    link: Link, n_ranks: int, micro_batches: int, grad_bytes: int = 2
) -> float:
    """Tokens per GPU per step that hide the all-reduce with k micro-batches.

    Under ``no_sync()`` the first k - 1 backward passes send nothing and the
    all-reduce overlaps only the last one, so each micro-batch must bring tau*:
    k tau* tokens per step.

    Raises:
        ValueError: ``micro_batches`` < 1, or as :func:`overlap_tokens`.
    """
    k = checks.positive_int("micro_batches", micro_batches)
    return k * overlap_tokens(link, n_ranks, grad_bytes)


def comm_over_backward(tokens: float, link: Link, n_ranks: int) -> float:
    """All-reduce time over backward time at ``tokens`` per GPU (bf16 gradients).

    Args:
        tokens: tokens per GPU per step.
        link: the GPU and its link.
        n_ranks: N_d.

    Returns:
        tau* / tokens: above 1 the all-reduce cannot hide behind backward.

    Raises:
        ValueError: ``tokens`` not positive, or as :func:`overlap_tokens`.
    """
    checks.positives(tokens=tokens)
    return overlap_tokens(link, n_ranks) / tokens


def min_bucket_bytes(link: Link, n_ranks: int, latency_share: float = 0.1) -> float:
    """Smallest bucket whose ring all-reduce spends at most ``latency_share`` on alpha.

    A ring all-reduce of n bytes on p ranks takes 2 (p - 1) alpha
    + 2 (p - 1) / p n beta; the latency is at most a share f of it once
    n >= p alpha (1 - f) / (f beta).

    Args:
        link: the link (alpha, and beta = 1 / bandwidth).
        n_ranks: p.
        latency_share: f, in (0, 1).

    Returns:
        Bytes.

    Raises:
        ValueError: ``n_ranks`` < 2 or ``latency_share`` not in (0, 1).
    """
    checks.integer("n_ranks", n_ranks, low=2)
    if not 0 < latency_share < 1:
        raise ValueError(f"latency_share must be in (0, 1), got {latency_share!r}")
    f, beta = latency_share, 1 / link.bandwidth
    return n_ranks * link.alpha * (1 - f) / (f * beta)


def latency_share(n: float, link: Link, n_ranks: int) -> float:
    """Share of a ring all-reduce of ``n`` bytes spent on latency (the cost model).

    Raises:
        ValueError: ``n`` negative or ``n_ranks`` < 1 (from the cost model).
    """
    model = LinkModel(alpha=link.alpha, beta=1 / link.bandwidth, gamma=0.0)
    return 2 * (n_ranks - 1) * link.alpha / ring_all_reduce_time(n, n_ranks, model)


def overlap_bound_figure(n_ranks: int = 8) -> Figure:
    """All-reduce over backward time against tokens per GPU, and bucket latency.

    Args:
        n_ranks: N_d.

    Returns:
        Two panels: tau* / tokens per link (left); the latency share of one bucket's
        all-reduce against its size (right).
    """
    fig = Figure(figsize=(7, 3.2))
    left, right = fig.subplots(1, 2)
    tokens = [2.0**k for k in range(8, 18)]
    sizes = [2.0**k for k in range(14, 31)]
    for key, style in (("nvlink", "o-"), ("nic400", "s-")):
        link = H100_LINKS[key]
        ratio = [comm_over_backward(t, link, n_ranks) for t in tokens]
        left.plot(tokens, ratio, style, label=link.name)
        right.plot(
            [n / 2**20 for n in sizes],
            [latency_share(n, link, n_ranks) for n in sizes],
            style,
            markersize=3,
            label=link.name,
        )
    left.axhline(1, color="gray", ls="--")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.legend(fontsize=7)
    left.set_yscale("log")
    left.set_xlabel("tokens per GPU per step")
    left.set_ylabel("all-reduce time / backward time")
    right.set_xlabel("bucket size (MiB)")
    right.set_ylabel("latency share of the all-reduce")
    right.axvline(25, color="gray", ls=":")
    fig.tight_layout()
    return fig
