"""What ``docs/inference/speculative_trees.rst`` shows: its values, tables and figures.

Everything is computed at build time on a toy pair (a few seconds): a small random
:class:`~aiinfra.models.transformer.Transformer` whose weights are scaled up so that
its laws are peaked (the target), and the same model with Gaussian noise added to
every weight (the draft), a stand-in for a draft that shares the target's features,
as DeepSeek-V3's MTP module and EAGLE's head do. Tree speculation runs
:mod:`aiinfra.infer.speculative.tree`; the GPU cost is the roofline of
:func:`~aiinfra.infer.step_cost.fused_step`; DeepSeek-V3's acceptance rate is
published (its Sec. 5.4.3), not measured here.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch
from matplotlib.figure import Figure

from aiinfra.accelerators import GPUS
from aiinfra.infer.speculative.bench import mean_acceptance, sample_cached
from aiinfra.infer.speculative.decoding import expected_tokens_per_call
from aiinfra.infer.speculative.toys import noisy_copy, scaled_model
from aiinfra.infer.speculative.tree import (
    tree_depths,
    tree_mask,
    tree_size,
    tree_speculative_generate,
)
from aiinfra.infer.step_cost import decode_step, fused_step, roof_time
from aiinfra.models.presets import preset
from aiinfra.models.transformer import Transformer, generate_greedy
from aiinfra.report import Table

# DeepSeek-V3 Sec. 5.4.3: "the acceptance rate of the second token prediction
# ranges between 85% and 90%", "1.8 times TPS"
MTP_ACCEPT_LOW, MTP_ACCEPT_HIGH = 0.85, 0.90
MTP_TPS = 1.8
EAGLE_LOW, EAGLE_HIGH = 2.7, 3.5  # Li et al. 2024, abstract: LLaMA2-Chat 70B latency
TOY_SHAPE = {"vocab_size": 64, "d_model": 64, "n_layers": 2, "n_heads": 4}
TOY_SCALE = 4.0  # weights times this: peaked laws, text that does not loop at once
TOY_SIGMA = 0.01  # the draft's weight noise (the target's weights: about 0.08)
TOY_SIGMAS = (0.005, 0.01, 0.015)  # drafts of the temperature figure
TOY_PROMPTS = 4  # prompts decoded, 4 random tokens each
TOY_NEW = 32  # tokens generated per prompt
TEMPERATURES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
CHAINS = tuple((1,) * k for k in (1, 2, 3, 4, 6))  # classic drafts of k tokens
TREES = ((2, 1, 1), (3, 2, 1), (4, 2, 1, 1), (4, 4, 2), (6, 3, 2))
TREE_GPU_MODEL = "llama-3-8b"
TREE_CONTEXT = 2048  # cached tokens per sequence in the GPU figure
TREE_BIG_BATCH = 128  # the largest batch of the GPU figure
TREE_BATCHES = (1, 8, 32, TREE_BIG_BATCH)  # sequences per step in the GPU figure
TREE_NODES = (1, 2, 4, 8, 16, 32, 64, 128)  # drafted nodes per sequence


@functools.cache
def _pair(sigma: float = TOY_SIGMA) -> tuple[Transformer, Transformer]:
    """The toy target and its noisy copy, from fixed seeds."""
    target = scaled_model(0, TOY_SCALE, **TOY_SHAPE, max_seq_len=128)
    return target, noisy_copy(target, sigma)


@functools.cache
def _prompts() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return torch.randint(TOY_SHAPE["vocab_size"], (TOY_PROMPTS, 4), generator=g)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread while the toy runs (tiny matmuls), then the caller's."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@functools.cache
def _ranks() -> torch.Tensor:
    """Share of positions where the target's greedy token is the draft's j-th best.

    Over the target's own greedy continuations of the prompts; entry ``j - 1``.
    """
    target, draft = _pair()
    counts = torch.zeros(TOY_SHAPE["vocab_size"], dtype=torch.float64)
    with torch.no_grad(), _one_thread():
        for prompt in _prompts():
            seq = generate_greedy(target, prompt[None], TOY_NEW)  # (1, 4 + new)
            want = seq[0, 4:]  # (new,)
            logits = draft(seq)[0, 3:-1]  # (new, V): the draft's law before each
            rank = (logits > logits.gather(1, want[:, None])).sum(1)  # (new,)
            counts += torch.bincount(rank, minlength=counts.numel()).double()
    return counts / counts.sum()


def tree_nodes(*branching: int) -> int:
    """Drafted nodes of a tree with ``branching`` children per depth."""
    return tree_size(branching)


def tree_top_b_rate(b: int) -> float:
    """Toy: share of positions where the target's token is in the draft's top ``b``."""
    return float(_ranks()[:b].sum())


def tree_model_tokens(*branching: int) -> float:
    """Cost model: expected tokens per target call of a tree.

    ``1 + sum_d prod_{i <= d} A(b_i)``, with ``A(b)`` the toy's top-``b`` rate:
    depth ``d`` is reached when every level above held the target's token, each
    level independently (the i.i.d. assumption of Leviathan et al.'s formula, which
    it gives back for a chain).
    """
    total, reach = 1.0, 1.0
    for b in branching:
        reach *= tree_top_b_rate(b)
        total += reach
    return total


@functools.cache
def _measured(branching: tuple[int, ...]) -> float:
    """Tokens per target call of tree speculation over the prompts (greedy)."""
    target, draft = _pair()
    emitted = calls = 0
    with _one_thread():
        for prompt in _prompts():
            r = tree_speculative_generate(
                target, draft, prompt[None], TOY_NEW, branching
            )
            emitted, calls = (
                emitted + r.accepted + r.target_calls,
                calls + r.target_calls,
            )
    return emitted / calls


def tree_measured_tokens(*branching: int) -> float:
    """Toy, measured: tokens per target call of tree speculation."""
    return _measured(branching)


def tree_table() -> Table:
    """Chains and trees on the toy: nodes, tokens per call modelled and measured."""
    rows = [
        [str(b), tree_size(b), round(tree_model_tokens(*b), 2)]
        + [round(tree_measured_tokens(*b), 2)]
        for b in CHAINS + TREES
    ]
    return Table(
        ["children per depth", "drafted nodes", "model", "measured"],
        rows,
        "Tokens per target call of greedy tree speculation on the toy pair (a "
        "random target and its noisy copy, not a real model); model: 1 + sum over "
        "depths of the product of the draft's top-b rates.",
        "{prompts} prompts x {new} tokens, draft noise {sigma}",
        words=(),
        fields={"prompts": TOY_PROMPTS, "new": TOY_NEW, "sigma": TOY_SIGMA},
    )


def tree_figure() -> Figure:
    """Tokens per target call against drafted nodes: chains and trees, toy."""
    fig = Figure(figsize=(5.5, 3), layout="constrained")
    ax = fig.add_subplot()
    for shapes, style, label in ((CHAINS, "o", "chains"), (TREES, "s", "trees")):
        n = [tree_size(b) for b in shapes]
        ax.plot(n, [tree_model_tokens(*b) for b in shapes], style + "--", mfc="none")
        ax.plot(n, [tree_measured_tokens(*b) for b in shapes], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("drafted nodes per round")
    ax.set_ylabel("tokens per target call")
    ax.legend(title="measured (dots), model (dashed)", fontsize=7, title_fontsize=7)
    return fig


def tree_mask_figure() -> Figure:
    """A small draft tree (two candidates, their children) and its attention mask."""
    parents = torch.tensor([-1, -1, 0, 0, 2, 1])  # nodes 0 and 1 follow the prefix
    depth = tree_depths(parents).tolist()
    xs = [0.0, 2.0, -0.6, 0.6, -0.6, 2.0]  # where each node is drawn
    fig = Figure(figsize=(7, 2.8), layout="constrained")
    a, b = fig.subplots(1, 2)
    for i, p in enumerate(parents.tolist()):
        src = (0.9, 1) if p < 0 else (xs[p], -depth[p])
        a.plot([src[0], xs[i]], [src[1], -depth[i]], "k-", lw=0.8)
        box = {"boxstyle": "round", "fc": "white"}
        a.annotate(str(i), (xs[i], -depth[i]), ha="center", va="center", bbox=box)
    a.annotate("last token", (0.9, 1), ha="center", va="center", color="C3")
    a.set_xlim(-1.5, 3)
    a.set_ylim(-2.6, 1.6)
    a.axis("off")
    a.set_title("draft tree", fontsize=9)
    b.imshow(tree_mask(parents).int(), cmap="Greys", vmin=0, vmax=1.6)
    b.set_xticks(range(6))
    b.set_yticks(range(6))
    b.set_xlabel("key (node)")
    b.set_ylabel("query (node)")
    b.set_title("tree attention mask", fontsize=9)
    return fig


@functools.cache
def _alpha(sigma: float, temperature: float) -> float:
    """Toy: mean acceptance ``sum min(p, q)`` on text the target samples at T."""
    target, draft = _pair(sigma)
    g = torch.Generator().manual_seed(3)
    total = 0.0
    with _one_thread():
        for prompt in _prompts():
            if temperature == 0:
                seq = generate_greedy(target, prompt[None], TOY_NEW)
            else:
                seq = sample_cached(target, prompt[None], TOY_NEW, temperature, g)
            total += mean_acceptance(target, draft, seq, 4, temperature)
    return total / TOY_PROMPTS


def tree_alpha(temperature: float, sigma: float = TOY_SIGMA) -> float:
    """Toy, measured: acceptance rate at ``temperature`` of the draft ``sigma``."""
    return _alpha(sigma, temperature)


def tree_temperature_figure() -> Figure:
    """Acceptance rate against temperature, three toy drafts."""
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for sigma, style in zip(TOY_SIGMAS, ("o-", "s--", "^:"), strict=True):
        ax.plot(
            TEMPERATURES,
            [tree_alpha(t, sigma) for t in TEMPERATURES],
            style,
            label=sigma,
        )
    ax.set_xlabel("temperature")
    ax.set_ylabel("acceptance rate alpha")
    ax.set_ylim(0, 1.02)
    ax.legend(title="draft noise", fontsize=7, title_fontsize=7)
    return fig


def mtp_tokens_per_call(alpha: float) -> float:
    """Leviathan et al.'s tokens per call for one drafted token: ``1 + alpha``."""
    return expected_tokens_per_call(alpha, 1)


def tree_verify_ratio(batch: int, nodes: int, context: int = TREE_CONTEXT) -> float:
    """Roofline: a step verifying ``nodes + 1`` tokens per sequence over a decode step.

    ``batch`` sequences of ``context`` cached tokens, Llama 3 8B on an H100; each
    node attends to the cache and to at most ``nodes + 1`` tree tokens (a bound:
    its ancestors are fewer).
    """
    c, gpu, n = preset(TREE_GPU_MODEL), GPUS["H100"], nodes + 1
    step = fused_step(c, batch * n, batch * n * (context + n), batch * (context + n))
    return roof_time(step, gpu) / roof_time(decode_step(c, batch, context), gpu)


def tree_gpu_figure() -> Figure:
    """Verification cost over a decode step against drafted nodes, per batch."""
    fig = Figure(figsize=(5.5, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for batch, style in zip(TREE_BATCHES, ("o-", "s--", "^:", "d-."), strict=True):
        ax.plot(
            TREE_NODES,
            [tree_verify_ratio(batch, n) for n in TREE_NODES],
            style,
            label=batch,
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("drafted nodes per sequence")
    ax.set_ylabel("verify time / decode time")
    ax.legend(title="sequences per step", fontsize=7, title_fontsize=7)
    return fig


def tree_flat_nodes(batch: int, limit: float = 1.1) -> int:
    """Most nodes of :data:`TREE_NODES` that cost under ``limit`` decode steps."""
    ok = [n for n in TREE_NODES if tree_verify_ratio(batch, n) < limit]
    return max(ok) if ok else 0
