"""A simulated data-parallel step: per-tensor backward and bucketed all-reduces.

Backward runs the model's gradient tensors in reverse registration order; a weight
matrix of Psi_w elements costs 4 Psi_w FLOPs per token (two matrix multiplies, one for
the input's gradient, one for the weight's; Kaplan et al. 2020) and takes
4 Psi_w tau / (MFU F) seconds at tau tokens per GPU and peak F. Biases, norms and
embedding lookups cost no matrix-multiply FLOPs. A gradient is ready when its
backward ends. Buckets fill in that order as ``DistributedDataParallel`` rebuilds
them after its first iteration (Li et al. 2020; torch's reducer): append a tensor,
close the bucket once it holds at least its cap, the first cap possibly smaller. A
bucket's all-reduce runs on a separate communication stream, one bucket at a time in
bucket order, and starts when its last gradient is ready and the previous all-reduce
has finished; it takes the ring time of the alpha-beta model
(:func:`aiinfra.comm.cost.ring_all_reduce_time`, Thakur et al. 2005). What runs
after the last backward op is *exposed*. Notation: N_d ranks, tau tokens per GPU per
step, F peak FLOP/s, n bytes per bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from aiinfra import checks
from aiinfra.comm.cost import LinkModel, ring_all_reduce_time
from aiinfra.parallel.data.figures import Span
from aiinfra.parallel.data.overlap import Link

BACKWARD_FLOPS = 4  # per weight element per token: twice forward's 2


@dataclass(frozen=True)
class Gradient:
    """One gradient tensor and the backward work that ends with it ready.

    Attributes:
        name: the parameter's name.
        numel: its elements.
        flops: backward FLOPs per token that end with this gradient ready.
    """

    name: str
    numel: int
    flops: float


@dataclass(frozen=True)
class DpTimeline:
    """One simulated data-parallel step; times in seconds from backward's start.

    Attributes:
        forward: the forward pass's time (before backward, not drawn).
        backward: one span per gradient, in backward order.
        all_reduce: one span per bucket, in launch order.
        buckets: each bucket's gradients, as indices into the backward order.
    """

    forward: float
    backward: list[Span]
    all_reduce: list[Span]
    buckets: list[list[int]]

    @property
    def backward_end(self) -> float:
        """When the last backward op ends."""
        return self.backward[-1].end

    @property
    def exposed(self) -> float:
        """Communication after the last backward op: the step waits for it."""
        return max(0.0, self.all_reduce[-1].end - self.backward_end)

    @property
    def step(self) -> float:
        """Forward + backward + exposed communication (no optimizer step)."""
        return self.forward + self.backward_end + self.exposed

    @property
    def communication(self) -> float:
        """Total all-reduce time, hidden or not."""
        return sum(s.end - s.start for s in self.all_reduce)


def model_gradients(model: nn.Module) -> list[Gradient]:
    """The trainable parameters of ``model`` in backward (reverse registration) order.

    A parameter of two or more dimensions inside an ``nn.Linear`` is a weight matrix
    (4 numel FLOPs per token); anything else (biases, norm gains, embedding tables)
    costs none.

    Raises:
        ValueError: ``model`` has no trainable parameter.
    """
    matrices = {
        id(m.weight) for m in model.modules() if isinstance(m, nn.Linear)
    }  # weights of linear layers: the matrix multiplies of backward
    grads = [
        Gradient(name, p.numel(), BACKWARD_FLOPS * p.numel() * (id(p) in matrices))
        for name, p in model.named_parameters()
        if p.requires_grad
    ]
    if not grads:
        raise ValueError("model must have a trainable parameter")
    return grads[::-1]


def assign_dp_buckets(
    numels: Sequence[int], grad_bytes: int, bucket_bytes: int, first_bucket_bytes: int
) -> list[list[int]]:
    """Buckets as DDP's reducer makes them from tensors in arrival order.

    Args:
        numels: elements of each gradient, in arrival (backward) order.
        grad_bytes: bytes per gradient element.
        bucket_bytes: the cap of every bucket but the first.
        first_bucket_bytes: the cap of the first bucket.

    Returns:
        Each bucket's tensor indices, in order.

    Raises:
        ValueError: no tensor, a numel < 1, or a size not positive.
    """
    if not numels or any(not isinstance(k, int) or k < 1 for k in numels):
        raise ValueError(f"numels must be a non-empty list of ints >= 1, got {numels}")
    for name, value in [
        ("grad_bytes", grad_bytes),
        ("bucket_bytes", bucket_bytes),
        ("first_bucket_bytes", first_bucket_bytes),
    ]:
        checks.positive(name, value)
    # region fill
    buckets, current, size = [], [], 0
    for i, numel in enumerate(numels):
        current.append(i)
        size += numel * grad_bytes
        cap = bucket_bytes if buckets else first_bucket_bytes
        if size >= cap:  # full: close it, the next one gets the regular cap
            buckets.append(current)
            current, size = [], 0
    # endregion
    return buckets + [current] * bool(current)


def simulate_dp_step(
    grads: Sequence[Gradient],
    tokens: int,
    link: Link,
    n_ranks: int,
    bucket_bytes: int,
    first_bucket_bytes: int | None = None,
    mfu: float = 0.4,
    grad_bytes: int = 2,
) -> DpTimeline:
    """Time one step of bucketed data parallelism on the cost model.

    Args:
        grads: the gradients in backward order (:func:`model_gradients`).
        tokens: tau, tokens per GPU per step.
        link: the GPU (peak F) and its link (bandwidth, alpha).
        n_ranks: N_d, ranks in the ring.
        bucket_bytes: the bucket cap, bytes.
        first_bucket_bytes: the first bucket's cap (DDP: 1 MiB with the default
            ``bucket_cap_mb``); None: ``bucket_bytes``.
        mfu: MFU, the fraction of peak FLOP/s that compute reaches, in (0, 1].
        grad_bytes: bytes per gradient element (2 for bf16).

    Returns:
        The timeline.

    Raises:
        ValueError: an argument out of range (named in the message).
    """
    checks.positive_int("tokens", tokens)
    checks.integer("n_ranks", n_ranks, low=2)
    checks.number("mfu", mfu, 0, 1.0, low_open=True)
    checks.positive("link.flops", link.flops)
    # An infinite bandwidth is allowed: the all-reduce then costs its latency only.
    checks.number("link.bandwidth", link.bandwidth, 0, low_open=True, finite=False)
    first = bucket_bytes if first_bucket_bytes is None else first_bucket_bytes
    numels = [g.numel for g in grads]
    buckets = assign_dp_buckets(numels, grad_bytes, bucket_bytes, first)
    net = LinkModel(alpha=link.alpha, beta=1 / link.bandwidth)
    # region simulate
    speed = mfu * link.flops  # FLOP/s that compute reaches
    backward, t = [], 0.0
    for i, g in enumerate(grads):  # one stream: each op starts when the last ends
        backward.append(Span(i, t, t + g.flops * tokens / speed))
        t = backward[-1].end  # gradient i is ready now
    all_reduce, free = [], 0.0  # the communication stream is free from ``free``
    for b, members in enumerate(buckets):
        start = max(free, backward[members[-1]].end)  # its last gradient is ready
        n = sum(numels[i] for i in members) * grad_bytes  # bytes in the bucket
        free = start + ring_all_reduce_time(n, n_ranks, net)
        all_reduce.append(Span(b, start, free))
    # endregion
    forward = sum(g.flops for g in grads) / 2 * tokens / speed  # 2 Psi tau FLOPs
    return DpTimeline(forward, backward, all_reduce, buckets)


def exposed_vs_bucket(
    grads: Sequence[Gradient],
    tokens: int,
    link: Link,
    n_ranks: int,
    caps: Sequence[int],
    mfu: float = 0.4,
) -> list[float]:
    """Exposed seconds at each bucket cap (an explicit cap: the first bucket too).

    Raises:
        ValueError: no cap, or as :func:`simulate_dp_step`.
    """
    if not caps:
        raise ValueError("caps must hold at least one bucket size")
    return [
        simulate_dp_step(grads, tokens, link, n_ranks, c, mfu=mfu).exposed for c in caps
    ]
