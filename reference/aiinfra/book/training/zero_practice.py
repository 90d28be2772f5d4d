"""What ``docs/training/zero_practice.rst`` shows: its values, tables, figures."""

from __future__ import annotations

import functools

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.comm.cost import LINKS
from aiinfra.memory.model_states import zero_model_states_bytes
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.parallel.zero import timeline as zero3_timeline
from aiinfra.parallel.zero import variants
from aiinfra.parallel.zero.optim import CLIP_EPS
from aiinfra.report import Table

ZERO_CLIP_EPS = CLIP_EPS  # what torch adds to the norm before dividing
# The ZeRO-3 timeline: Llama 3 8B's layers, 16384 tokens per GPU per step (two
# 8192-token sequences), a ring of 64 ranks whose slowest hop is one 400G NIC.
ZERO3_MODEL, ZERO3_TOKENS, ZERO3_RANKS, ZERO3_LINK = "llama-3-8b", 16384, 64, "nic400"
_ZERO3_VARIANT_KEYS = {  # the page's short names for the timeline's variants
    "sync": "synchronous",
    "prefetch": "prefetch one unit ahead",
    "keep": "prefetch, no reshard after forward",
}


@functools.cache
def _zero3_costs() -> zero3_timeline.UnitCosts:
    return zero3_timeline.layer_costs(
        ZERO3_MODEL, ZERO3_TOKENS, ZERO3_RANKS, ZERO3_LINK
    )


@functools.cache
def _zero3_timelines() -> dict[str, zero3_timeline.Zero3Timeline]:
    return zero3_timeline.variant_timelines(_zero3_costs())


def zero3_layer_millions() -> float:
    """Parameters of one Llama 3 8B layer, millions (Psi_u)."""
    return zero3_timeline.layer_parameters(ZERO3_MODEL) / 1e6


def zero3_unit_ms(kind: str) -> float:
    """One layer's time on the cost model, ms.

    Args:
        kind: ``"forward"``, ``"backward"``, ``"gather"`` or ``"reduce"``.

    Raises:
        ValueError: an unknown ``kind``.
    """
    kinds = ("forward", "backward", "gather", "reduce")
    if kind not in kinds:
        raise ValueError(f"kind must be one of {kinds}, got {kind!r}")
    return getattr(_zero3_costs(), kind)[0] * 1e3


def _timeline(variant: str) -> zero3_timeline.Zero3Timeline:
    if variant not in _ZERO3_VARIANT_KEYS:
        raise ValueError(
            f"variant must be one of {sorted(_ZERO3_VARIANT_KEYS)}, got {variant!r}"
        )
    return _zero3_timelines()[_ZERO3_VARIANT_KEYS[variant]]


def zero3_compute_ms() -> float:
    """Forward and backward compute of all layers, ms: the step with nothing exposed."""
    return _timeline("sync").compute_time * 1e3


def zero3_step_ms(variant: str) -> float:
    """Simulated step time of a variant (``sync``, ``prefetch``, ``keep``), ms."""
    return _timeline(variant).step * 1e3


def zero3_exposed_ms(variant: str) -> float:
    """Communication the compute waited for in a variant, ms."""
    return _timeline(variant).exposed * 1e3


def zero3_overlap_tokens() -> float:
    """Tokens per GPU per micro-batch above which ZeRO-3's gathers can hide, T*."""
    return zero3_timeline.forward_overlap_tokens(ZERO3_RANKS, ZERO3_LINK)


def zero3_timeline_figure() -> Figure:
    """Llama 3 8B's ZeRO-3 step on the cost model: three variants."""
    return zero3_timeline.timeline_figure(_zero3_costs())


# Sharding variants: Llama 3 8B on 8 nodes of 8 H100s (HSDP shards over a node).
SHARD_MODEL, SHARD_GPUS, SHARD_NODE = "llama-3-8b", 64, 8
_RING_SIZES = (8, 64, 512)  # ranks in the reduce-scatter ring of the error table


def _shard_psi() -> int:
    return count_parameters(preset(SHARD_MODEL)).total


def shard_psi_billions() -> float:
    """Llama 3 8B's parameters, billions (Psi of the sharding section)."""
    return _shard_psi() / 1e9


def shard_seconds(variant: str, link: str) -> float:
    """Seconds per step one GPU spends on a link, cost model, Llama 3 8B on 64 GPUs.

    Args:
        variant: ``"FSDP"``, ``"HSDP"`` or ``"FSDP + CPU offload"``.
        link: ``"nvlink"``, ``"nic"`` or ``"host"`` (PCIe).
    """
    links = ("nvlink", "nic", "host")
    if link not in links:
        raise ValueError(f"link must be one of {links}, got {link!r}")
    seconds = variants.sharding_traffic(variant, _shard_psi(), SHARD_GPUS).link_seconds
    return dict(zip(links, seconds.values(), strict=True))[link]


def shard_states_gib(variant: str) -> float:
    """Model states per GPU (bf16 weights and gradients, fp32 Adam), GiB, 64 GPUs.

    Args:
        variant: ``"FSDP"`` (sharded over all 64) or ``"HSDP"`` (over one node).
    """
    ranks = {"FSDP": SHARD_GPUS, "HSDP": SHARD_NODE}
    if variant not in ranks:
        raise ValueError(f"variant must be one of {sorted(ranks)}, got {variant!r}")
    return zero_model_states_bytes(_shard_psi(), 3, ranks[variant]).total / 2**30


def fp32_reduce_traffic_ratio() -> float:
    """A step's bytes with an fp32 reduce-scatter over the all-bf16 step's."""
    fp32 = variants.sharding_collective_bytes(1, 2, 1, 2, 4)
    bf16 = variants.sharding_collective_bytes(1, 2, 1, 2, 2)
    return sum(fp32.values()) / sum(bf16.values())


def host_link_gbps() -> float:
    """The host link's bandwidth each way, GB/s (PCIe Gen5 x16 of the link table)."""
    return 1 / LINKS[variants.HOST_LINK].beta / 1e9


def offload_tokens() -> float:
    """Tokens per GPU per micro-batch above which offload copies hide, one node."""
    return variants.offload_hidden_tokens(SHARD_NODE, GPUS["H100"].bf16_flops)


def sharding_bytes_table() -> Table:
    """The toy's bytes per rank and step by collective, for each run variant."""
    rows = []
    for name in variants.RUN_VARIANTS:
        sent = variants.toy_collective_bytes(name)
        rows.append([name, *(round(sent[k]) for k in variants.COLLECTIVES)])
    return Table(
        ["variant", *variants.COLLECTIVES],
        rows,
        note=(
            "Bytes one rank sends per step in a ring, from the formula, for the toy "
            "of three fully_shard units on 4 ranks (HSDP: a 2 x 2 mesh). The slow "
            "test runs fully_shard on 4 gloo ranks, counts every collective it "
            "issues, and finds these bytes."
        ),
    )


def ring_error_table() -> Table:
    """Relative error of a ring's sum of bf16 gradients, bf16 or fp32 on the wire."""
    rows = [
        [
            n,
            f"{variants.ring_sum_error(n, torch.bfloat16):.1e}",
            f"{variants.ring_sum_error(n, torch.float32):.1e}",
        ]
        for n in _RING_SIZES
    ]
    return Table(
        ["ranks", "bf16 wire", "fp32 wire"],
        rows,
        note=(
            "Relative error of the reduced gradient against the exact sum: seeded "
            "normal gradients rounded to bf16, summed hop by hop as a ring sends "
            "them, the running sum rounded to the wire's format at each hop."
        ),
        words=(),
    )


def sharding_variants_figure() -> Figure:
    """Seconds per step per GPU on each link for FSDP, HSDP and offload: cost model."""
    return variants.variants_figure(float(_shard_psi()))
