"""KV budget: how many tokens of KV cache fit on GPUs next to the weights.

Serving keeps the weights and the KV cache of every running sequence in HBM. What
the weights leave, divided by the cache's bytes per token (:mod:`aiinfra.models.
kv_cache_size`), is the number of tokens in flight: batch size times context.
Tensor parallelism over ``p`` GPUs splits both the weights and the KV heads, so the
budget of the group is ``p`` HBMs minus one copy of the weights, while ``p <= G``.
Past ``G`` key/value heads a GPU still needs whole heads: vLLM gives each rank
``max(1, G // p)`` of them (``ModelConfig.get_num_kv_heads``), so the group stores
``p / G`` copies of the cache, and MLA's one latent per token is stored on every
rank. Nothing is reserved
here for activations, the CUDA context or fragmentation, which a serving engine
such as vLLM (Kwon et al. 2023) keeps back: the counts are upper bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiinfra import checks
from aiinfra.accelerators import GPUS, Gpu
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.params import count_parameters
from aiinfra.models.presets import preset
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); counting does not
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class KVBudget:
    """Bytes of a serving group and the tokens of cache they hold."""

    weight_bytes: int
    free_bytes: int  # HBM of the group minus the weights; negative: they do not fit
    bytes_per_token: int

    @property
    def tokens(self) -> int:
        """Tokens of KV cache that fit; 0 when the weights alone overflow."""
        return max(self.free_bytes, 0) // self.bytes_per_token


def kv_copies(c: TransformerConfig, n_gpus: int) -> float:
    """Copies of each token's keys and values a tensor-parallel group stores.

    Each of the ``p`` ranks holds ``max(1, G // p)`` of the ``G`` key/value heads,
    as vLLM does: 1 while ``p <= G``, ``p / G`` beyond. MLA's latent is one shared
    "head": every rank stores all of it.

    Raises:
        ValueError: ``n_gpus`` is not a positive integer, or neither of ``G`` and
            ``p`` divides the other (the heads cannot be split evenly).
    """
    checks.positive_int("n_gpus", n_gpus)
    G = 1 if c.is_mla else c.n_kv_heads
    if G % n_gpus and n_gpus % G:
        raise ValueError(f"n_gpus ({n_gpus}) and the {G} KV heads must divide evenly")
    return n_gpus * max(1, G // n_gpus) / G


def kv_budget(
    c: TransformerConfig,
    gpu: Gpu,
    n_gpus: int = 1,
    bytes_per_element: int = 2,
    bytes_per_weight: int = 2,
) -> KVBudget:
    """The KV budget of model ``c`` served on ``n_gpus`` of ``gpu``.

    Args:
        c: the model (a dense one: every layer as the config describes it).
        gpu: the accelerator (:data:`~aiinfra.accelerators.GPUS`).
        n_gpus: ``p``, the tensor-parallel group size (:func:`kv_copies`).
        bytes_per_element: of the cache, 2 for bf16.
        bytes_per_weight: of the weights, 2 for bf16.

    Returns:
        Weight, free and per-token bytes (of the group, copies included).

    Raises:
        ValueError: a size is not a positive integer.
    """
    for arg, value in (
        ("n_gpus", n_gpus),
        ("bytes_per_element", bytes_per_element),
        ("bytes_per_weight", bytes_per_weight),
    ):
        checks.positive_int(arg, value)
    kv_copies(c, n_gpus)  # the heads must split evenly
    # region budget (the arguments are checked above)
    weights = count_parameters(c).total * bytes_per_weight
    per_token = kv_bytes_per_token(c, bytes_per_element) * kv_copies(c, n_gpus)
    return KVBudget(weights, n_gpus * gpu.hbm_bytes - weights, int(per_token))


SETUPS = (  # (model, GPU, group size)
    ("llama-3-8b", "H100", 1),
    ("llama-3-8b", "H200", 1),
    ("llama-3-70b", "H100", 1),
    ("llama-3-70b", "H100", 2),
    ("llama-3-70b", "H100", 4),
    ("llama-3-70b", "H100", 8),
    ("llama-3-70b", "H200", 1),
    ("llama-3-70b", "H200", 2),
)


#: The columns of a KV budget per group (the book's table adds the model first).
COLUMNS = [
    "GPUs",
    "weights (GB)",
    "free (GB)",
    "KiB / token",
    "tokens of cache",
    "sequences",
]


def kv_budget_table(setups: tuple = SETUPS, context: int = 8192) -> Table:
    """Tokens of bf16 KV cache that fit next to bf16 weights, per setup."""
    rows = []
    for name, gpu_key, n in setups:
        b = kv_budget(preset(name), GPUS[gpu_key], n)
        rows.append(
            [
                name,
                f"{n} x {gpu_key}",
                round(b.weight_bytes / 1e9, 1),
                round(b.free_bytes / 1e9, 1),
                b.bytes_per_token // 1024,
                b.tokens,
                b.tokens // context,
            ]
        )
    note = (
        "GB = 1e9 bytes, KiB = 1024 bytes; bf16 weights and cache; free = HBM of "
        "the group minus the weights, nothing reserved for activations or the "
        "runtime (an upper bound). Sequences: how many of the stated length fit."
    )
    stamp, fields = "sequences of {context} tokens", {"context": context}
    return Table(["model", *COLUMNS], rows, note, stamp, fields=fields)


def kv_budget_figure(max_gpus: int = 16) -> Figure:
    """Tokens of cache that fit against the group size, Llama 3 8B and 70B."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.6), layout="constrained")
    ax = fig.add_subplot()
    sizes = [n for n in (1, 2, 4, 8, 16) if n <= max_gpus]
    for name in ("llama-3-8b", "llama-3-70b"):
        for gpu_key, style in (("H100", "-o"), ("H200", "--s")):
            c = preset(name)
            tokens = [kv_budget(c, GPUS[gpu_key], n).tokens for n in sizes]
            points = [(n, t / 1e6) for n, t in zip(sizes, tokens, strict=True) if t]
            ax.plot(*zip(*points, strict=True), style, label=f"{name}, {gpu_key}")
    for context in (8192, 131072):
        ax.axhline(context / 1e6, color="gray", linewidth=0.8, linestyle=":")
        ax.annotate(f"{context // 1024}K", (sizes[0], context / 1e6), fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(n) for n in sizes])
    ax.set_xlabel("GPUs in the tensor-parallel group")
    ax.set_ylabel("tokens of KV cache (millions)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
