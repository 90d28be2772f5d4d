"""Figures of the paged KV cache, drawn from runs of the allocator and the waste model.

Three pictures: the KV slots a stream of requests reserves under contiguous, power-of-
two and paged allocation (:mod:`aiinfra.infer.paged.waste`); the block tables of a few
sequences mapping logical blocks to scattered physical blocks; and the blocks that
sharing saves, by prefix caching of a common system prompt and by forking parallel
samples (:class:`aiinfra.infer.paged.block_allocator.BlockAllocator`, run, not
modelled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from aiinfra import checks
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.infer.paged.waste import (
    TIME_POLICIES,
    VLLM_ORCA_MAX,
    VLLM_ORCA_ORACLE,
    reserved_slots,
    time_averaged_used,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POLICIES = ("contiguous", "pow2", "paged")


def draw_lengths(
    num_requests: int, max_prompt_len: int, max_output_len: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform prompt and output lengths, drawn as ``request_stream_waste`` draws them.

    Returns:
        ``(prompt_lens, output_lens)``, each of shape ``(num_requests,)``.
    """
    checks.positive_ints(
        num_requests=num_requests,
        max_prompt_len=max_prompt_len,
        max_output_len=max_output_len,
    )
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(1, max_prompt_len + 1, (num_requests,), generator=gen)
    output = torch.randint(1, max_output_len + 1, (num_requests,), generator=gen)
    return prompt, output


def waste_figure(
    prompt: torch.Tensor,
    output: torch.Tensor,
    block_size: int,
    max_len: int,
    shown: int,
) -> Figure:
    """Per-request reservations at the end (left); the used share over time (right)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 3.4), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[2.2, 1])
    for i in range(shown):
        r = reserved_slots(prompt[i : i + 1], output[i : i + 1], block_size, max_len)
        for policy, color, width in zip(
            POLICIES, ("0.85", "tab:orange", "tab:blue"), (0.8, 0.8, 0.6), strict=True
        ):
            left.bar(i, getattr(r, policy), color=color, width=width)
        left.bar(i, r.tokens, color="tab:green", width=0.3)
    left.set_xlabel("request")
    left.set_ylabel("KV slots (tokens)")
    for label, color in zip(
        ("reserved at $T_\\mathrm{max}$", "reserved, power of two", "paged blocks"),
        ("0.85", "tab:orange", "tab:blue"),
        strict=True,
    ):
        left.bar(0, 0, color=color, label=label)
    left.bar(0, 0, color="tab:green", width=0.3, label="tokens held")
    left.legend(fontsize=8, loc="upper right", ncol=2)
    left.set_ylim(0, max_len * 1.35)
    shares = time_averaged_used(prompt, output, block_size, max_len)
    used = [100 * shares[p] for p in TIME_POLICIES]
    colours = ["0.6", "tab:orange", "tab:purple", "tab:blue"]
    right.bar(TIME_POLICIES, used, color=colours)
    vllm = {"max": VLLM_ORCA_MAX, "oracle": VLLM_ORCA_ORACLE}  # its Fig. 2
    right.plot(
        [TIME_POLICIES.index(k) for k in vllm],
        [100 * v for v in vllm.values()],
        "rv",
        label="vLLM: Orca",
    )
    right.axhline(96, color="tab:red", linestyle="--", linewidth=1, label="vLLM: paged")
    for x, u in enumerate(used):
        right.annotate(f"{u:.1f}", (x, u), ha="center", va="bottom", fontsize=8)
    right.set_ylim(0, 135)
    right.set_ylabel("slots holding tokens, over time (%)")
    right.tick_params(axis="x", labelsize=8)
    right.legend(fontsize=8, loc="upper left")
    return fig


def block_table_run(block_size: int = 4, num_blocks: int = 8) -> BlockAllocator:
    """Three sequences that grow in turns, one freed, a fourth given the free blocks.

    Returns:
        The allocator after the run: tables ``{1: ..., 2: ..., 3: ...}``.
    """
    alloc = BlockAllocator(num_blocks, block_size, enable_prefix_caching=False)
    for seq, prompt in ((0, 3), (1, 5), (2, 2)):
        alloc.allocate(seq, range(prompt))
    for step in range(6):  # decode in turns: new blocks come from wherever is free
        for seq in (0, 1, 2):
            if step < (4, 2, 6)[seq]:
                alloc.append(seq, step)
    alloc.free(0)
    alloc.allocate(3, range(13))  # the free blocks, then those sequence 0 freed
    return alloc


def block_table_figure(alloc: BlockAllocator) -> Figure:
    """Each sequence's logical blocks (left) and where they live in the pool (right)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import ConnectionPatch, Rectangle

    b, colors = alloc.block_size, ("tab:blue", "tab:orange", "tab:green", "tab:purple")
    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.4])
    seqs = sorted(alloc.block_tables)
    owner = {}
    for row, seq in enumerate(seqs):
        n, color = len(alloc.token_ids[seq]), colors[seq % len(colors)]
        y = len(seqs) - 1 - row
        left.annotate(f"seq {seq}", (-0.15, y + 0.4), ha="right", va="center")
        for j, blk in enumerate(alloc.block_tables[seq]):
            fill = min(b, n - j * b) / b
            left.add_patch(Rectangle((j, y), 0.9, 0.8, fill=False, edgecolor=color))
            left.add_patch(Rectangle((j, y), 0.9 * fill, 0.8, color=color, alpha=0.5))
            left.annotate(str(blk), (j + 0.45, y + 0.4), ha="center", va="center")
            owner[blk] = (color, fill, seq, j, y)
    left.set_xlim(-1.2, max(len(t) for t in alloc.block_tables.values()) + 0.2)
    left.set_ylim(-0.2, len(seqs))
    left.set_title("block tables (logical block -> physical id)", fontsize=9)
    cols = 4
    for blk in range(alloc.num_blocks):
        x, y = blk % cols, alloc.num_blocks // cols - 1 - blk // cols
        color, fill, _, _, _ = owner.get(blk, ("0.7", 0.0, None, 0, 0))
        right.add_patch(Rectangle((x, y), 0.9, 0.8, fill=False, edgecolor=color))
        right.add_patch(Rectangle((x, y), 0.9 * fill, 0.8, color=color, alpha=0.5))
        right.annotate(f"#{blk}", (x + 0.45, y + 0.4), ha="center", va="center")
        if blk in owner:
            _, _, _, j, sy = owner[blk]
            fig.add_artist(
                ConnectionPatch(
                    (j + 0.9, sy + 0.4),
                    (x, y + 0.4),
                    "data",
                    "data",
                    axesA=left,
                    axesB=right,
                    color=color,
                    alpha=0.35,
                    linewidth=0.8,
                )
            )
    right.set_xlim(-0.1, cols)
    right.set_ylim(-0.2, alloc.num_blocks // cols)
    right.set_title(
        f"physical pool ({alloc.num_blocks} blocks of {b} slots)", fontsize=9
    )
    for ax in (left, right):
        ax.set_axis_off()
    return fig


def prefix_sharing_blocks(
    num_requests: int, system_len: int, max_user_len: int, block_size: int, seed: int
) -> tuple[int, int, int]:
    """Blocks held by requests that share a system prompt, without and with caching.

    Every request is the same ``system_len`` tokens followed by its own question of
    ``1 .. max_user_len`` tokens (uniform); all stay resident.

    Returns:
        ``(blocks without prefix caching, blocks with it, prompt tokens served from
        the cache)``.
    """
    checks.positive_ints(
        num_requests=num_requests,
        system_len=system_len,
        max_user_len=max_user_len,
        block_size=block_size,
    )
    gen = torch.Generator().manual_seed(seed)
    system = torch.randint(1000, (system_len,), generator=gen).tolist()
    prompts = [
        system + torch.randint(1000, (int(n),), generator=gen).tolist()
        for n in torch.randint(1, max_user_len + 1, (num_requests,), generator=gen)
    ]
    used, cached = [], 0
    for caching in (False, True):
        need = sum(-(-len(p) // block_size) for p in prompts)
        alloc = BlockAllocator(need, block_size, enable_prefix_caching=caching)
        for i, p in enumerate(prompts):
            alloc.allocate(i, p)
        used.append(need - alloc.num_free_blocks)
        cached = sum(alloc.num_cached_tokens.values())
    return used[0], used[1], cached


def parallel_sampling_blocks(
    num_samples: int, prompt_len: int, output_len: int, block_size: int
) -> tuple[int, int, int]:
    """Blocks of ``num_samples`` completions of one prompt: separate, and forked.

    Returns:
        ``(blocks as separate sequences, blocks when forked, copy-on-write copies)``.
    """
    checks.positive_ints(
        num_samples=num_samples,
        prompt_len=prompt_len,
        output_len=output_len,
        block_size=block_size,
    )
    separate = num_samples * -(-(prompt_len + output_len) // block_size)
    alloc = BlockAllocator(separate, block_size, enable_prefix_caching=False)
    alloc.allocate(0, range(prompt_len))
    for s in range(1, num_samples):
        alloc.fork(0, s)
    copies = 0
    for t in range(output_len):  # every sample appends its own token in turn
        for s in range(num_samples):
            copies += alloc.append(s, 10_000 * s + t) is not None
    return separate, separate - alloc.num_free_blocks, copies


def sharing_figure(
    counts: list[int],
    system_len: int,
    max_user_len: int,
    prompt_len: int,
    output_len: int,
    block_size: int,
    seed: int,
) -> Figure:
    """Blocks held against requests sharing a prompt (left) and samples (right)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    prefix = [
        prefix_sharing_blocks(n, system_len, max_user_len, block_size, seed)
        for n in counts
    ]
    left.plot(counts, [p[0] for p in prefix], "o-", color="0.5", label="no sharing")
    left.plot(counts, [p[1] for p in prefix], "s-", label="prefix caching")
    left.set_xlabel("requests with the same system prompt")
    left.set_title(f"{system_len}-token system prompt", fontsize=9)
    samples = [
        parallel_sampling_blocks(n, prompt_len, output_len, block_size) for n in counts
    ]
    right.plot(counts, [s[0] for s in samples], "o-", color="0.5", label="no sharing")
    right.plot(counts, [s[1] for s in samples], "s-", label="fork + copy-on-write")
    right.set_xlabel("parallel samples of one prompt")
    right.set_title(f"{prompt_len}-token prompt, {output_len} new tokens", fontsize=9)
    for ax in (left, right):
        ax.set_ylabel("KV blocks held")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_ylim(bottom=0)
    return fig
