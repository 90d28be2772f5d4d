"""Sharding variants: FSDP, HSDP on a (replicate, shard) mesh, and CPU offload.

One step of FSDP2 (``fully_shard``) with ``reshard_after_forward=True`` and one
micro-batch moves three collectives per unit. On a 1-D mesh of N GPUs:
an all-gather of the unit's ``Psi`` parameters before forward, another before
backward, and a reduce-scatter of its gradients. On a 2-D mesh of R replicas of
S shards (HSDP), the gathers and the reduce-scatter run in a group of S (the GPUs
of a node, over NVLink) and an all-reduce of each rank's ``Psi / S`` gradient shard
runs in a group of R (one rank per node, over the NIC); model states then take
``16 Psi / S`` bytes per GPU instead of ``16 Psi / N``.

Bytes are what one rank sends in a ring (the book's convention, Thakur et al.
2005): ``(g - 1) / g`` of the buffer for an all-gather or a reduce-scatter in a
group of g, twice that for an all-reduce. ``MixedPrecisionPolicy(param_dtype=
bf16, reduce_dtype=fp32)`` gathers 2-byte parameters and reduces 4-byte gradients
(Llama 3's numerics, Dubey et al. 2024, Sec. 3.3.2). ``CPUOffloadPolicy`` keeps the
sharded fp32 parameters and gradients on the host: FSDP2 copies a unit's shard
host-to-device before each of its all-gathers and its reduced gradient shard
device-to-host (``_fsdp_param.py``, ``_fsdp_collectives.py``), over PCIe.

:func:`count_sharding_traffic` runs ``fully_shard`` on spawned gloo ranks and counts
every collective it issues; :func:`sharding_collective_bytes` is the formula the
tests hold it to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from aiinfra import checks
from aiinfra.comm.cost import LINKS
from aiinfra.distributed import run_distributed
from aiinfra.parallel.toy import mlp, regression_batches
from aiinfra.parallel.zero.fsdp2_sync import padded_psi

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The variants of the run and of the formula: (mesh, bytes of a gathered
#: parameter, bytes of a reduced gradient). ``"hsdp"`` is the 2-D mesh.
RUN_VARIANTS: dict[str, tuple[str, int, int]] = {
    "FSDP": ("1-D", 4, 4),
    "HSDP": ("2-D", 4, 4),
    "FSDP, bf16 gathers, fp32 reduce-scatter": ("1-D", 2, 4),
}
WIDTHS = (6, 8, 8, 3)  # the toy: three fully_shard units of nn.Linear
COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce")
HOST_LINK = "pcie5-x16"  # the host link of the one table, aiinfra.comm.cost.LINKS


def sharding_collective_bytes(
    psi: int,
    shard: int,
    replicas: int = 1,
    param_bytes: int = 2,
    reduce_bytes: int = 4,
) -> dict[str, float]:
    """Bytes one rank sends per step in each kind of collective (ring), one micro-batch.

    Args:
        psi: parameters (padded as FSDP2 pads each dim 0 to a multiple of ``shard``).
        shard: S, the ranks each parameter is sharded over.
        replicas: R, the replicas (1: plain FSDP over S ranks).
        param_bytes: bytes of a gathered parameter (bf16: 2).
        reduce_bytes: bytes of a reduced gradient (fp32: 4).

    Returns:
        ``all-gather``: two gathers of ``Psi``, ``2 (S-1)/S Psi b_p``;
        ``reduce-scatter``: ``(S-1)/S Psi b_r``; ``all-reduce`` of the
        ``Psi / S`` shard across replicas: ``2 (R-1)/R Psi/S b_r``.

    Raises:
        ValueError: a non-positive argument.
    """
    checks.positive_ints(
        psi=psi,
        shard=shard,
        replicas=replicas,
        param_bytes=param_bytes,
        reduce_bytes=reduce_bytes,
    )
    s, r = shard, replicas
    return {
        "all-gather": 2 * (s - 1) / s * psi * param_bytes,
        "reduce-scatter": (s - 1) / s * psi * reduce_bytes,
        "all-reduce": 2 * (r - 1) / r * psi / s * reduce_bytes,
    }


@dataclass(frozen=True)
class StepTraffic:
    """Bytes one GPU moves per step on each link, and the seconds they take.

    Attributes:
        scale_up: bytes over NVLink (collectives inside a node).
        scale_out: bytes over the NIC (collectives across nodes).
        host: bytes over PCIe in its busier direction, host to device.
        link_seconds: link name -> seconds for its bytes (links of
            :data:`aiinfra.comm.cost.LINKS`, bandwidth only).
    """

    scale_up: float
    scale_out: float
    host: float
    link_seconds: dict[str, float]


#: Variants of the cost model, priced on a node of ``gpus_per_node`` GPUs.
SHARDINGS = ("FSDP", "HSDP", "FSDP + CPU offload")


def sharding_traffic(
    variant: str,
    psi: float,
    n_gpus: int,
    gpus_per_node: int = 8,
    param_bytes: int = 2,
    reduce_bytes: int = 4,
    nvlink: str = "h100-nvlink",
    nic: str = "ib400",
    host_bytes: int = 4,
) -> StepTraffic:
    """One step's traffic per GPU for a variant of :data:`SHARDINGS`, cost model.

    FSDP shards over all ``n_gpus``: its ring crosses nodes, so it runs at the NIC's
    pace (the chapter's convention: a ring's slowest hop). HSDP shards over the
    node and all-reduces shards across the ``n_gpus / gpus_per_node`` nodes. The
    offload is FSDP's collectives plus FSDP2's PCIe copies: the fp32 shard
    ``Psi / N`` host-to-device before each of the two all-gathers (and the
    gradient shard back, the other direction).

    Args:
        variant: a name of :data:`SHARDINGS`.
        psi: parameters.
        n_gpus: N, a multiple of ``gpus_per_node`` when larger than it.
        gpus_per_node: GPUs on one NVLink domain.
        param_bytes: bytes of a gathered parameter.
        reduce_bytes: bytes of a reduced gradient.
        nvlink: the NVLink of :data:`~aiinfra.comm.cost.LINKS`.
        nic: the NIC of :data:`~aiinfra.comm.cost.LINKS`.
        host_bytes: bytes of a parameter kept on the host (fp32).

    Raises:
        ValueError: an unknown variant, a non-positive size, or ``n_gpus`` not a
            multiple of ``gpus_per_node``.
    """
    checks.one_of("variant", variant, SHARDINGS)
    checks.positive("psi", psi)
    checks.positive_ints(n_gpus=n_gpus, gpus_per_node=gpus_per_node)
    if n_gpus > gpus_per_node and n_gpus % gpus_per_node:
        raise ValueError(
            f"n_gpus must be a multiple of gpus_per_node={gpus_per_node}, got {n_gpus}"
        )
    links = {
        k: checks.one_of(k, v, sorted(LINKS))
        for k, v in (("nvlink", nvlink), ("nic", nic))
    }
    up = out = host = 0.0
    if variant == "HSDP" and n_gpus > gpus_per_node:
        b = sharding_collective_bytes(
            1, gpus_per_node, n_gpus // gpus_per_node, param_bytes, reduce_bytes
        )
        up = (b["all-gather"] + b["reduce-scatter"]) * psi
        out = b["all-reduce"] * psi
    else:
        b = sharding_collective_bytes(1, n_gpus, 1, param_bytes, reduce_bytes)
        total = (b["all-gather"] + b["reduce-scatter"]) * psi
        up, out = (0.0, total) if n_gpus > gpus_per_node else (total, 0.0)
        if variant == "FSDP + CPU offload":
            host = 2 * psi / n_gpus * host_bytes  # the shard, before each gather
    seconds = {
        links["nvlink"]: up * LINKS[links["nvlink"]].beta,
        links["nic"]: out * LINKS[links["nic"]].beta,
        HOST_LINK: host * LINKS[HOST_LINK].beta,
    }
    return StepTraffic(up, out, host, seconds)


def offload_hidden_tokens(
    n_gpus: int, flops: float, host_bytes: int = 4, link: str = HOST_LINK
) -> float:
    """Tokens per GPU per step above which the offload's copies hide under compute.

    A unit's forward computes ``2 Psi_u tau`` FLOPs while its shard of
    ``Psi_u / N`` parameters crosses PCIe (``host_bytes`` each); backward doubles
    the compute and copies the shard once more. Equal times give
    ``tau* = host_bytes F beta / (2 N)`` for forward, the tighter of the two.

    Args:
        n_gpus: N, the ranks that shard the parameters.
        flops: F, the GPU's FLOP/s.
        host_bytes: bytes of a parameter on the host.
        link: the host link of :data:`~aiinfra.comm.cost.LINKS`.
    """
    checks.positive_int("n_gpus", n_gpus)
    checks.positive("flops", flops)
    beta = LINKS[checks.one_of("link", link, sorted(LINKS))].beta
    return host_bytes * flops * beta / (2 * n_gpus)


def ring_sum_error(n_ranks: int, wire: torch.dtype, numel: int = 4096) -> float:
    """Relative error of a ring's sum of ``n_ranks`` bf16 gradients, per wire dtype.

    In a ring reduce-scatter each hop adds its own gradient to the partial sum it
    received and sends the result on in the wire dtype, so a bf16 wire rounds the
    running sum ``n_ranks - 1`` times; an fp32 wire (``reduce_dtype=fp32``) rounds
    it to 24 bits instead of 8. The gradients are seeded normal values rounded to
    bf16 (what a bf16 backward produces); the exact sum is taken in fp64.

    Args:
        n_ranks: ranks in the ring, >= 2.
        wire: ``torch.bfloat16`` or ``torch.float32``.
        numel: elements per gradient.

    Returns:
        ``||sum_ring - sum_exact|| / ||sum_exact||``.
    """
    checks.integer("n_ranks", n_ranks, low=2)
    checks.positive_int("numel", numel)
    checks.one_of("wire", wire, (torch.bfloat16, torch.float32))
    g = torch.Generator().manual_seed(0)
    grads = torch.randn(n_ranks, numel, generator=g).to(torch.bfloat16).double()
    running = grads[0].to(wire)
    for r in range(1, n_ranks):
        running = (running.float() + grads[r].float()).to(wire)  # add, then send
    exact = grads.sum(0)
    return float((running.double() - exact).norm() / exact.norm())


def toy_collective_bytes(variant: str, world_size: int = 4) -> dict[str, float]:
    """The formula for the toy's run: bytes per rank and step, by collective.

    Args:
        variant: a name of :data:`RUN_VARIANTS`.
        world_size: ranks; HSDP uses a mesh of (2, world_size / 2).
    """
    mesh, param_bytes, reduce_bytes = RUN_VARIANTS[
        checks.one_of("variant", variant, list(RUN_VARIANTS))
    ]
    checks.integer("world_size", world_size, low=2)
    replicas = 2 if mesh == "2-D" else 1
    shard = world_size // replicas
    psi = padded_psi(mlp(WIDTHS), shard)
    return sharding_collective_bytes(psi, shard, replicas, param_bytes, reduce_bytes)


# region count
def _counting(log: list[tuple[str, int, int]]) -> dict[str, Any]:
    """Wrappers of the three collectives FSDP2 calls that log (kind, group, bytes)."""
    gather, scatter, reduce = (
        dist.all_gather_single,
        dist.reduce_scatter_single,
        dist.all_reduce,
    )

    def counted_gather(output: Tensor, input: Tensor, *a: Any, **kw: Any) -> Any:  # noqa: A002
        g = dist.get_world_size(kw.get("group"))
        log.append(("all-gather", g, (g - 1) * output.nbytes // g))
        return gather(output, input, *a, **kw)

    def counted_scatter(*a: Any, **kw: Any) -> Any:
        g = dist.get_world_size(kw.get("group"))
        log.append(("reduce-scatter", g, (g - 1) * kw["input"].nbytes // g))
        return scatter(*a, **kw)

    def counted_reduce(tensor: Tensor, *a: Any, **kw: Any) -> Any:
        g = dist.get_world_size(kw.get("group"))
        log.append(("all-reduce", g, 2 * (g - 1) * tensor.nbytes // g))
        return reduce(tensor, *a, **kw)

    return {
        "all_gather_single": counted_gather,
        "reduce_scatter_single": counted_scatter,
        "all_reduce": counted_reduce,
    }


# endregion


def _rank_counts() -> dict[str, list[tuple[str, int, int]]]:
    """On every rank: each variant's collectives in one step, logged."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    n = dist.get_world_size()
    log: list[tuple[str, int, int]] = []
    saved = {name: getattr(dist, name) for name in _counting(log)}
    x, y = regression_batches(1, 8, WIDTHS[0], WIDTHS[-1])[0]
    out = {}
    try:
        for name, (mesh_kind, param_bytes, _) in RUN_VARIANTS.items():
            mesh = (
                init_device_mesh(
                    "cpu", (2, n // 2), mesh_dim_names=("replicate", "shard")
                )
                if mesh_kind == "2-D"
                else init_device_mesh("cpu", (n,))
            )
            policy = MixedPrecisionPolicy(
                param_dtype=torch.bfloat16 if param_bytes == 2 else None,
                reduce_dtype=torch.float32,
            )
            model = mlp(WIDTHS)
            for layer in model:
                if isinstance(layer, nn.Linear):
                    fully_shard(layer, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            for attr, fn in _counting(log).items():
                setattr(dist, attr, fn)
            log.clear()
            nn.functional.mse_loss(model(x).float(), y).backward()
            for attr, fn in saved.items():
                setattr(dist, attr, fn)
            out[name] = list(log)
    finally:
        for attr, fn in saved.items():
            setattr(dist, attr, fn)
    return out


def count_sharding_traffic(
    world_size: int = 4, timeout: float = 180.0
) -> dict[str, list[tuple[str, int, int]]]:
    """Every collective of one FSDP2 step per variant, counted in a run.

    Args:
        world_size: gloo ranks, even (HSDP's mesh is (2, world_size / 2)).
        timeout: seconds for the spawned run.

    Returns:
        Rank 0's log per variant of :data:`RUN_VARIANTS`: (collective, group
        size, bytes sent in a ring) in issue order.

    Raises:
        ValueError: ``world_size`` is not an even number >= 2.
    """
    checks.integer("world_size", world_size, low=2)
    if world_size % 2:
        raise ValueError(f"world_size must be even (a 2 x N/2 mesh), got {world_size}")
    return run_distributed(_rank_counts, world_size, timeout=timeout)[0]


FIGURE_LINES = {  # legend -> (variant, which link's seconds), cost model
    "FSDP, its ring (NIC past one node)": ("FSDP", "ring"),
    "HSDP, NVLink inside the node": ("HSDP", "nvlink"),
    "HSDP, NIC across nodes": ("HSDP", "nic"),
    "CPU offload, PCIe host to device": ("FSDP + CPU offload", "host"),
}


def variants_figure(
    psi: float,
    gpus: tuple[int, ...] = tuple(2**k for k in range(4, 13)),
    fs: float = 8,
) -> Figure:
    """Seconds per step on each link, per GPU, against cluster size: cost model.

    Args:
        psi: the model's parameters.
        gpus: cluster sizes, multiples of a node's 8 GPUs, past one node.
        fs: base font size, points.
    """
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6), layout="constrained")
    ax = fig.subplots()
    for (label, (variant, link)), style in zip(
        FIGURE_LINES.items(), ("o-", "s--", "s-", "^-"), strict=True
    ):
        ys = []
        for n in gpus:
            t = sharding_traffic(variant, psi, n).link_seconds
            by_link = dict(zip(("nvlink", "nic", "host"), t.values(), strict=True))
            ys.append(
                max(by_link["nvlink"], by_link["nic"])
                if link == "ring"
                else by_link[link]
            )
        ax.plot(gpus, ys, style, label=label, markersize=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs", fontsize=fs)
    ax.set_ylabel("seconds per step on the link", fontsize=fs)
    ax.tick_params(labelsize=fs)
    ax.legend(fontsize=fs)
    return fig
