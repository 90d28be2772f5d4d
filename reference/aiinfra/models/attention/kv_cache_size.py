"""KV cache size per token of real models: the formulas, checked by filling caches.

Decoding keeps the keys and values of every past token. DeepSeek-V2 (DeepSeek-AI
2024, Table 1) gives the elements cached per token: ``2 H d L`` for MHA,
``2 n_g d_h l`` for GQA, ``2 d_h l`` for MQA and ``(d_c + d_h^R) l`` for MLA, with
``l`` layers, ``n_h`` heads, ``n_g`` KV groups of width ``d_h``, and MLA's latent
``d_c`` and RoPE key ``d^R``. :func:`measured_elements_per_token` checks each
formula against the caches of this package: it builds attention layers with a model's
real head counts and widths (the model width ``d`` does not enter the cache, so it is
shrunk to 16), runs a few tokens through them and counts what the caches hold.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from aiinfra import checks
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset
from aiinfra.report import Table

if TYPE_CHECKING:  # drawing needs matplotlib (the docs extra); counting does not
    from matplotlib.figure import Figure

GIB = 2**30
# Presets with one kind of attention each: GQA of several widths (Llama 3, Mistral,
# Qwen2.5) and MLA (DeepSeek).
ATTENTION_MODELS = (
    "llama-3-8b",
    "llama-3-70b",
    "mistral-7b",
    "qwen2.5-72b",
    "deepseek-v2",
    "deepseek-v3",
)


def attention_kind(c: TransformerConfig) -> str:
    """``"MLA"``, ``"MHA"`` (``G = H``), ``"MQA"`` (``G = 1``) or ``"GQA"``."""
    if c.is_mla:
        return "MLA"
    if c.n_kv_heads == c.n_heads:
        return "MHA"
    return "MQA" if c.n_kv_heads == 1 else "GQA"


def elements_per_token(c: TransformerConfig) -> int:
    """Elements cached per token over all layers (DeepSeek-V2, Table 1).

    MHA and MQA are GQA with ``G = H`` and ``G = 1``.
    """
    if c.is_mla:
        return (c.kv_lora_rank + c.rope_head_dim) * c.n_layers  # (d_c + d_h^R) l
    return 2 * c.n_kv_heads * c.head_dim * c.n_layers  # 2 n_g d_h l


def kv_bytes_per_token(c: TransformerConfig, bytes_per_element: float = 2) -> float:
    """Bytes cached per token over all layers: elements times the element's size.

    The one count of a cache's size in the package: the KV budget, the step cost,
    the paged allocator's waste and the quantized caches (their codes) all use it.

    Args:
        c: the model (MHA, GQA, MQA or MLA).
        bytes_per_element: 2 for a bf16/fp16 cache, 1 for fp8 or int8 codes.

    Returns:
        :func:`elements_per_token` times ``bytes_per_element`` (an int for an int
        size).

    Raises:
        ValueError: ``bytes_per_element`` is not a finite number > 0.
    """
    checks.positive("bytes_per_element", bytes_per_element)
    return elements_per_token(c) * bytes_per_element


def measured_elements_per_token(
    c: TransformerConfig, n_layers: int = 2, seq_len: int = 4
) -> int:
    """Elements per token and layer held by real caches after a short prefill.

    Args:
        c: the model; its head counts and widths are kept, ``d_model`` is shrunk.
        n_layers: how many layers to build (one at a time, to bound memory).
        seq_len: tokens run through each layer; the caches hold exactly these.

    Returns:
        Elements held by all the caches, divided by ``seq_len * n_layers``.

    Raises:
        ValueError: ``n_layers`` or ``seq_len`` is not a positive integer.
    """
    import torch  # only the measurement needs it: the counts run under Pyodide

    from aiinfra.models.transformer import make_attention

    checks.positive_ints(n_layers=n_layers, seq_len=seq_len)
    narrow = dataclasses.replace(
        c, d_model=16, q_lora_rank=min(c.q_lora_rank, 16), max_seq_len=seq_len
    )
    held = 0
    for _ in range(n_layers):
        attn = make_attention(narrow)
        cache = attn.new_cache(batch_size=1, max_seq_len=seq_len)
        with torch.no_grad():
            attn(torch.randn(1, seq_len, narrow.d_model), cache)
        held += cache.k.numel() + cache.v.numel()
        del attn  # the up-projections of MLA's 128 heads are the bulk
    return held // (seq_len * n_layers)


def equivalent_gqa_groups(c: TransformerConfig) -> float:
    """The ``G`` of a GQA with the same cache: ``elements / (2 d L)``.

    DeepSeek-V2 (Table 1) states 2.25 for MLA with ``d_c = 4 d``,
    ``d^R = d / 2``.
    """
    return elements_per_token(c) / (2 * c.head_dim * c.n_layers)


def mha_to_cache_ratio(name: str) -> float:
    """How many times smaller the cache of ``name`` is than MHA's ``2 H d L``.

    Args:
        name: a key of :data:`~aiinfra.models.presets.PRESETS`.

    Returns:
        ``2 H d L`` divided by :func:`elements_per_token`.

    Raises:
        ValueError: ``name`` is not a preset.
    """
    c = preset(name)
    return 2 * c.n_heads * c.head_dim * c.n_layers / elements_per_token(c)


def kv_cache_table(
    names: tuple[str, ...] = ATTENTION_MODELS,
    bytes_per_element: int = 2,
    context: int = 128 * 1024,
    measure: bool = True,
) -> Table:
    """KV cache per token of released models, by formula and measured per layer.

    Args:
        names: keys of :data:`~aiinfra.models.presets.PRESETS`.
        bytes_per_element: 2 for a bf16/fp16 cache.
        context: tokens of one sequence, for the last column.
        measure: also fill real caches (:func:`measured_elements_per_token`).

    Returns:
        One row per model.

    Raises:
        ValueError: a name is not a preset, or a size is not a positive integer.
    """
    checks.positive_ints(bytes_per_element=bytes_per_element, context=context)
    rows = []
    for name in names:
        c = preset(name)
        n = elements_per_token(c)
        measured = measured_elements_per_token(c) if measure else ""
        rows.append(
            [
                name,
                attention_kind(c),
                c.n_layers,
                n // c.n_layers,
                measured,
                n,
                round(equivalent_gqa_groups(c), 2),
                round(n * bytes_per_element / 1024, 1),
                round(n * bytes_per_element * context / GIB, 1),
            ]
        )
    note = (
        "Elements from DeepSeek-V2 Table 1; measured = elements held per token and "
        "layer by this package's caches. KiB and GiB (2^30 bytes); the last column "
        "is one sequence of the stated length (Mistral-7B's 4096-token sliding "
        "window would cap its cache at 4096 tokens)."
    )
    stamp = "{bytes} bytes per element; {context} tokens"
    fields = {"bytes": bytes_per_element, "context": context}
    return Table(
        [
            "model",
            "attention",
            "layers",
            "per layer (formula)",
            "per layer (measured)",
            "elements / token",
            "equivalent n_g",
            "KiB / token",
            "GiB / sequence",
        ],
        rows,
        note,
        stamp=stamp,
        fields=fields,
    )


def kv_cache_figure(
    names: tuple[str, ...] = ATTENTION_MODELS, bytes_per_element: int = 2
) -> Figure:
    """KiB cached per token of released models, against MHA with the same heads.

    Args:
        names: keys of :data:`~aiinfra.models.presets.PRESETS`.
        bytes_per_element: 2 for a bf16/fp16 cache.

    Returns:
        Two horizontal bars per model, log scale: its cache and MHA's
        ``2 H d L`` elements.

    Raises:
        ValueError: a name is not a preset, or ``bytes_per_element`` is not a
            positive integer.
    """
    from matplotlib.figure import Figure

    checks.positive_ints(bytes_per_element=bytes_per_element)
    configs = [preset(name) for name in names]
    cached = [elements_per_token(c) * bytes_per_element / 1024 for c in configs]
    mha = [
        2 * c.n_heads * c.head_dim * c.n_layers * bytes_per_element / 1024
        for c in configs
    ]
    fig = Figure(figsize=(6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    y = range(len(names))
    labels = [f"{n} ({attention_kind(c)})" for n, c in zip(names, configs, strict=True)]
    ax.barh(
        [i + 0.2 for i in y], mha, 0.4, label="MHA with the same heads", color="0.8"
    )
    ax.barh([i - 0.2 for i in y], cached, 0.4, label="cached")
    for i, kib in zip(y, cached, strict=True):
        ax.annotate(f"{kib:g}", (kib * 1.1, i - 0.2), va="center", fontsize=7)
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("KiB of cache per token")
    fig.legend(fontsize=7, loc="outside upper center", ncols=2)
    return fig
