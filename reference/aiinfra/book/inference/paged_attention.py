"""What ``docs/inference/paged_attention.rst`` shows: its values and figures.

The request _stream is the paged-waste model's: prompts and outputs uniform on
``1 .. 1024`` tokens, a contiguous reservation of OPT's 2048-token maximum, blocks of
16 tokens (vLLM's default), OPT-13B's 800 KiB of KV cache per token (vLLM, Sec. 3).
The speed values use Llama 3 8B's attention shape and the H100's datasheet.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from aiinfra.accelerators import GPUS
from aiinfra.infer.paged import figures as paged_figures
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.infer.paged.waste import (
    VLLM_ORCA_MAX,
    VLLM_ORCA_ORACLE,
    WasteReport,
    request_stream_waste,
    time_averaged_used,
)
from aiinfra.models.attention.kv_cache_size import kv_bytes_per_token
from aiinfra.models.config import TransformerConfig
from aiinfra.models.presets import preset

BLOCK = 16  # tokens per block: vLLM's default
MAX_PROMPT = MAX_OUTPUT = 1024  # uniform lengths 1 .. 1024 each
T_MAX = MAX_PROMPT + MAX_OUTPUT  # OPT's longest sequence, the contiguous reservation
REQUESTS = 1000
SEED = 0
SYSTEM_LEN, MAX_USER_LEN = 500, 200  # the shared system prompt, the own question
SAMPLE_PROMPT, SAMPLE_OUTPUT = 200, 100  # parallel sampling: prompt, new tokens
COUNTS = [1, 2, 4, 8, 16, 32]  # requests or samples in the sharing figure
MOST = COUNTS[-1]  # the count the prose quotes
TABLE_ENTRY_BYTES = 4  # an int32 physical block id


# OPT-13B's attention (Zhang et al. 2022, Table 1): 40 layers, d = 5120, 40 heads.
_OPT_13B = TransformerConfig(50272, 5120, 40, 40, d_ff=20480, max_seq_len=2048)


def _opt13b_bytes_per_token() -> int:
    """OPT-13B's K and V per token: 40 layers, 40 heads of 128, fp16."""
    return kv_bytes_per_token(_OPT_13B, 2)


def opt13b_kib_per_token() -> int:
    """OPT-13B's KV cache per token, KiB."""
    return _opt13b_bytes_per_token() // 1024


def _stream() -> WasteReport:
    """The request _stream's slots under the three policies."""
    gen = torch.Generator().manual_seed(SEED)
    return request_stream_waste(
        REQUESTS, MAX_PROMPT, MAX_OUTPUT, BLOCK, _opt13b_bytes_per_token(), gen
    )


def used(policy: str) -> float:
    """Share of a policy's reserved slots that hold tokens."""
    return _stream().used_fraction(policy)


def mean_length() -> float:
    """Mean final length of the _stream's requests, tokens."""
    return _stream().tokens / REQUESTS


def paged_waste_per_request() -> float:
    """Empty slots of the last block, tokens per request (mean)."""
    r = _stream()
    return (r.paged - r.tokens) / REQUESTS


def contiguous_gib_per_request() -> float:
    """KV memory one contiguous OPT-13B reservation holds, GiB."""
    return T_MAX * _opt13b_bytes_per_token() / 2**30


def batch_gain() -> float:
    """How many more requests the same memory holds paged than contiguous."""
    return used("paged") / used("contiguous")


def time_used(policy: str) -> float:
    """Share of reserved slots holding tokens over every decode step (vLLM's way)."""
    prompt, output = paged_figures.draw_lengths(REQUESTS, MAX_PROMPT, MAX_OUTPUT, SEED)
    return time_averaged_used(prompt, output, BLOCK, T_MAX)[policy]


def vllm_used(policy: str) -> float:
    """The share vLLM's Fig. 2 gives Orca (Max) or Orca (Oracle)."""
    return {"max": VLLM_ORCA_MAX, "oracle": VLLM_ORCA_ORACLE}[policy]


def waste_figure() -> Figure:
    """Reserved vs held slots per request, and the used share per policy."""
    prompt, output = paged_figures.draw_lengths(REQUESTS, MAX_PROMPT, MAX_OUTPUT, SEED)
    return paged_figures.waste_figure(prompt, output, BLOCK, T_MAX, 24)


def block_table_figure() -> Figure:
    """The block tables of the allocator's example run."""
    return paged_figures.block_table_figure(paged_figures.block_table_run())


def llama_block_bytes() -> int:
    """Bytes of K and V in one block of one KV head of one layer, Llama 3 8B, bf16."""
    return 2 * BLOCK * preset("llama-3-8b").head_dim * 2


def cache_bytes_per_table_byte() -> int:
    """Bytes of K/V a program reads per byte of block table it reads."""
    return llama_block_bytes() // TABLE_ENTRY_BYTES


DECODE_BATCH, DECODE_CONTEXT = 64, 4096  # the decode step of the speed paragraph


def llama_decode_cache_gb() -> float:
    """KV cache one decode step reads, 64 Llama 3 8B sequences of 4096 tokens, GB."""
    c = preset("llama-3-8b")
    per_token = kv_bytes_per_token(c, 2)
    return DECODE_BATCH * DECODE_CONTEXT * per_token / 1e9


def llama_decode_cache_ms() -> float:
    """Time to read that cache once at the H100's HBM bandwidth, ms."""
    return llama_decode_cache_gb() * 1e9 / GPUS["H100"].hbm_bandwidth * 1e3


def _prefix(n: int) -> tuple[int, int, int]:
    return paged_figures.prefix_sharing_blocks(n, SYSTEM_LEN, MAX_USER_LEN, BLOCK, SEED)


def _samples(n: int) -> tuple[int, int, int]:
    return paged_figures.parallel_sampling_blocks(
        n, SAMPLE_PROMPT, SAMPLE_OUTPUT, BLOCK
    )


def shared_system_blocks() -> int:
    """Full blocks of the system prompt, the ones prefix caching can share."""
    return SYSTEM_LEN // BLOCK


def prefix_blocks(caching: bool, n: int = MOST) -> int:
    """Blocks held by ``n`` requests with the system prompt."""
    return _prefix(n)[1 if caching else 0]


def prefix_saved(n: int = MOST) -> float:
    """Share of blocks prefix caching saves for ``n`` requests."""
    without, with_cache, _ = _prefix(n)
    return 1 - with_cache / without


def prefix_cached_tokens(n: int = MOST) -> int:
    """Prompt tokens of ``n`` requests served from the cache (no prefill)."""
    return _prefix(n)[2]


def _sample_blocks(forked: bool, n: int = MOST) -> int:
    """Blocks held by ``n`` parallel samples."""
    return _samples(n)[1 if forked else 0]


def sample_saved(n: int = MOST) -> float:
    """Share of blocks forking saves for ``n`` samples."""
    separate, forked, _ = _samples(n)
    return 1 - forked / separate


def sample_copies(n: int = MOST) -> int:
    """Copy-on-write block copies of ``n`` samples."""
    return _samples(n)[2]


def sharing_figure() -> Figure:
    """Blocks held against requests sharing a prompt and against samples."""
    return paged_figures.sharing_figure(
        COUNTS, SYSTEM_LEN, MAX_USER_LEN, SAMPLE_PROMPT, SAMPLE_OUTPUT, BLOCK, SEED
    )


# Sharing, one allocator call at a time

SHARE_BLOCK, SHARE_POOL = 4, 8  # tokens per block and blocks in the drawn pool
_SYSTEM = [11, 12, 13, 14]  # one full block of a shared beginning
_SHARE_STEPS = (  # (title, allocator call) of the drawn run
    ("allocate", ("allocate", "A", _SYSTEM + [21, 22])),
    ("fork", ("fork", "A", "B")),
    ("copy-on-write", ("append", "A", 23)),
    ("write in place", ("append", "B", 31)),
    ("prefix hit", ("allocate", "C", _SYSTEM + [41, 42, 43])),
    ("free", ("free", "A", None)),
)


@dataclass(frozen=True)
class PoolState:
    """The allocator after one call: tables, lengths, counts, hashes, what changed."""

    title: str
    tables: dict[str, tuple[int, ...]]
    lengths: dict[str, int]
    ref_counts: tuple[int, ...]
    hashed: frozenset[int]  # physical blocks named by a prefix hash
    copied: tuple[int, int] | None  # (src, dst) of a copy-on-write
    hit: tuple[int, ...]  # cached blocks a new table reused


def _sharing_states() -> list[PoolState]:
    """Run the drawn sequence of calls on a :class:`BlockAllocator`, state by state."""
    alloc = BlockAllocator(SHARE_POOL, SHARE_BLOCK)
    seq = {"A": 0, "B": 1, "C": 2}  # the allocator's ids of the drawn sequences
    states = []
    for title, (call, name, arg) in _SHARE_STEPS:
        copied, hit = None, ()
        if call == "allocate":
            hit = tuple(alloc.cached_prefix(arg))
            alloc.allocate(seq[name], arg)
        elif call == "fork":
            alloc.fork(seq[name], seq[arg])
        elif call == "append":
            copied = alloc.append(seq[name], arg)
        else:
            alloc.free(seq[name])
        names = {v: k for k, v in seq.items()}
        states.append(
            PoolState(
                title,
                {names[s]: tuple(t) for s, t in sorted(alloc.block_tables.items())},
                {names[s]: len(t) for s, t in sorted(alloc.token_ids.items())},
                tuple(alloc.ref_counts),
                alloc.hashed_blocks,
                copied,
                hit,
            )
        )
    return states


_POOL_COLOURS = ("white", "#9ecae1", "#3182bd")  # reference count 0, 1, 2 or more


def _draw_pool(ax: Axes, state: PoolState, fontsize: float) -> None:
    """One state: each table's logical blocks above, the physical pool below."""
    rows = ["A", "B", "C"]
    for row, name in enumerate(rows):
        if name not in state.tables:
            continue
        ax.text(-0.3, row + 0.4, name, ha="right", va="center", fontsize=fontsize)
        n = state.lengths[name]
        for j, blk in enumerate(state.tables[name]):
            fill = min(SHARE_BLOCK, n - j * SHARE_BLOCK) / SHARE_BLOCK
            ax.add_patch(Rectangle((j, row), 0.9, 0.8, fill=False, edgecolor="0.3"))
            ax.add_patch(
                Rectangle(
                    (j, row),
                    0.9 * fill,
                    0.8,
                    color=_POOL_COLOURS[min(state.ref_counts[blk], 2)],
                    gid=f"table:{name}:{j}:{blk}",
                )
            )
            ax.text(
                j + 0.45,
                row + 0.4,
                f"#{blk}",
                ha="center",
                va="center",
                fontsize=fontsize,
            )
    y = len(rows) + 0.6
    for blk, count in enumerate(state.ref_counts):
        edge = "0.3"
        if state.copied is not None and blk == state.copied[1]:
            edge = "C3"
        elif blk in state.hit:
            edge = "C2"
        ax.add_patch(
            Rectangle(
                (blk, y),
                0.9,
                0.8,
                facecolor=_POOL_COLOURS[min(count, 2)],
                edgecolor=edge,
                linewidth=3 if edge != "0.3" else 1,
                hatch="//" if blk in state.hashed else None,
                gid=f"pool:{blk}:{count}",
            )
        )
        ax.text(
            blk + 0.45, y + 0.4, f"#{blk}", ha="center", va="center", fontsize=fontsize
        )
    ax.set_xlim(-0.9, SHARE_POOL)
    ax.set_ylim(y + 1, -0.2)
    ax.set_axis_off()
    ax.set_title(state.title, fontsize=fontsize)


def _pool_legend(fig: Figure, fontsize: float) -> None:
    handles = [
        Patch(facecolor=_POOL_COLOURS[1], edgecolor="0.3", label="one table"),
        Patch(facecolor=_POOL_COLOURS[2], edgecolor="0.3", label="shared"),
        Patch(
            facecolor="white", edgecolor="0.3", hatch="//", label="hashed full block"
        ),
        Patch(facecolor="white", edgecolor="C3", lw=3, label="copy"),
        Patch(facecolor="white", edgecolor="C2", lw=3, label="prefix hit"),
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=5,
        fontsize=fontsize,
        frameon=False,
    )


def sharing_steps_figure() -> Figure:
    """The drawn run's six states: fork, copy-on-write, a prefix hit, a free."""
    states = _sharing_states()
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    for ax, state in zip(fig.subplots(2, 3).flat, states, strict=True):
        _draw_pool(ax, state, 8)
    _pool_legend(fig, 8)
    return fig


def sharing_steps_frames() -> list[Figure]:
    """The same states one per slide."""
    frames = []
    for state in _sharing_states():
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_pool(fig.subplots(), state, 16)
        _pool_legend(fig, 14)
        frames.append(fig)
    return frames
