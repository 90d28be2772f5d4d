"""Tree speculation: a draft proposes a token tree, the target checks it in one pass.

A chain of ``k`` drafted tokens dies at its first wrong token. A *token tree* keeps
several candidates per position: the draft's top-``b_1`` tokens after the last one,
the top-``b_2`` after each of those, and so on. The target runs ONE forward pass over
all the tree's nodes with a *tree attention mask*: a node sees the cached prefix, its
ancestors and itself, never its siblings or cousins, and its position (for RoPE or a
learned table) is the cache length plus its depth, so each node gets exactly the
logits it would get in a sequence made of its path (SpecInfer, Miao et al. 2024;
Medusa, Cai et al. 2024; EAGLE, Li et al. 2024). Greedy verification walks down from
the root, taking the child whose token is the target's argmax, and adds the argmax of
the last accepted node; the output is then the target's own greedy decoding. The
keys and values of the accepted path are moved to the front of each cache
(:func:`keep_path`), the others forgotten. Notation: ``n`` tree nodes, ``t`` trunk
tokens (what a cache lacks of the sequence), ``b_i`` children per node at depth ``i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from aiinfra import checks
from aiinfra.infer.speculative.cached import rollback
from aiinfra.models.attention.gqa import GroupedQueryAttention, KVCache
from aiinfra.models.transformer import Transformer


def tree_mask(parents: Tensor) -> Tensor:
    """Which node sees which: itself and its ancestors.

    Args:
        parents: each node's parent index, shape ``(n,)``; ``-1`` for a node that
            follows the cached prefix; a parent comes before its child.

    Returns:
        ``visible[i, j]``, shape ``(n, n)``: ``j`` is ``i`` or an ancestor of ``i``.

    Raises:
        ValueError: a parent index is not ``-1`` or an earlier node.
    """
    n = parents.shape[0]
    visible = torch.eye(n, dtype=torch.bool)  # (n, n)
    for i, p in enumerate(parents.tolist()):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] must be -1 or an earlier node, got {p}")
        if p >= 0:
            visible[i] |= visible[p]  # the parent's ancestors, and the parent
    return visible


def tree_depths(parents: Tensor) -> Tensor:
    """Depth of each node below the cached prefix: 0 for a root, parent's + 1."""
    depth: list[int] = []
    for p in parents.tolist():
        depth.append(0 if p < 0 else depth[p] + 1)
    return torch.tensor(depth, dtype=torch.long)  # (n,)


def tree_attention(q: Tensor, k: Tensor, v: Tensor, visible: Tensor) -> Tensor:
    """Softmax attention of ``H`` query heads over ``G`` shared KV heads, masked.

    Args:
        q: queries of the ``n`` nodes, ``(B, H, n, d)``.
        k: keys, cached prefix then nodes, ``(B, G, S, d)``.
        v: values, ``(B, G, S, d_v)``.
        visible: which key each node sees, ``(n, S)``.

    Returns:
        ``(B, H, n, d_v)``.
    """
    B, H, n, D = q.shape
    G = k.shape[1]
    q = q.view(B, G, H // G, n, D)  # (B, G, H/G, n, d)
    scores = torch.einsum("bgrtd,bgsd->bgrts", q, k) / math.sqrt(D)  # (B,G,H/G,n,S)
    scores = scores.masked_fill(~visible.to(q.device), float("-inf"))
    p = torch.softmax(scores.float(), dim=-1).type_as(v)
    o = torch.einsum("bgrts,bgse->bgrte", p, v)  # (B, G, H/G, n, d_v)
    return o.reshape(B, H, n, v.shape[-1])  # (B, H, n, d_v)


@torch.no_grad()
def tree_forward(
    model: Transformer, caches: list[KVCache], tokens: Tensor, parents: Tensor
) -> Tensor:
    """One forward pass over a token tree that follows the cached prefix.

    The nodes' keys and values are appended to the caches (in node order), so that
    :func:`keep_path` can keep the accepted ones.

    Args:
        model: a model whose blocks use grouped-query attention without a window.
        caches: one cache per layer, holding the prefix.
        tokens: the nodes' token ids, ``(n,)``.
        parents: their parents (:func:`tree_mask`).

    Returns:
        The logits of the token after each node, ``(n, V)``.

    Raises:
        TypeError: a block's attention is not grouped-query attention.
        ValueError: a sliding window, or bad ``parents``.
    """
    for block in model.blocks:
        if not isinstance(block.attn, GroupedQueryAttention):
            raise TypeError("tree_forward needs grouped-query attention (not MLA)")
    if model.config.sliding_window:
        raise ValueError("tree_forward does not model a sliding window")
    # region tree-forward
    start, n = caches[0].length, tokens.shape[0]
    positions = start + tree_depths(parents)  # (n,): prefix length + depth
    visible = torch.cat(
        [torch.ones(n, start, dtype=torch.bool), tree_mask(parents)], dim=1
    )  # (n, start + n): the whole prefix, then ancestors and self
    device = model.embed.weight.device
    x = model.embed(tokens.to(device))[None]  # (1, n, h)
    if model.pos_embed is not None:
        x = x + model.pos_embed(positions.to(device))
    for block, cache in zip(model.blocks, caches, strict=True):
        a, h = block.attn, block.attn_norm(x)
        H, G, D = a.n_heads, a.n_kv_heads, a.head_dim
        q = a.wq(h).view(1, n, H, D).transpose(1, 2)  # (1, H, n, d)
        k = a.wk(h).view(1, n, G, D).transpose(1, 2)  # (1, G, n, d)
        v = a.wv(h).view(1, n, G, D).transpose(1, 2)  # (1, G, n, d)
        if a.rope is not None:
            pos = positions.to(device)
            q, k = a.rope(q, positions=pos), a.rope(k, positions=pos)
        k, v = cache.update(k, v)  # (1, G, start + n, d)
        o = tree_attention(q, k, v, visible)  # (1, H, n, d)
        x = x + a.wo(o.transpose(1, 2).reshape(1, n, H * D))  # (1, n, h)
        x = x + block.mlp(block.mlp_norm(x))
    # endregion
    return model.head(model.norm(x))[0]  # (n, V)


def keep_path(caches: list[KVCache], start: int, path: list[int]) -> None:
    """Keep the keys and values of the nodes on ``path``, in order, after ``start``.

    Args:
        caches: caches that hold the prefix (``start`` positions) then the nodes.
        start: the prefix length before the tree was appended.
        path: node indices, root first.
    """
    idx = torch.tensor(path, dtype=torch.long) + start  # (m,)
    for cache in caches:
        i = idx.to(cache.k.device)
        cache.k[:, :, start : start + len(path)] = cache.k[:, :, i]  # gather copies
        cache.v[:, :, start : start + len(path)] = cache.v[:, :, i]
    rollback(caches, start + len(path))


def with_trunk(trunk: list[int], drafted: list[int], parents: list[int]) -> tuple:
    """The whole tree of a model: its trunk as a chain, then the drafted nodes.

    ``parents`` of the drafted nodes count among the drafted nodes, ``-1`` for a
    child of the trunk's last token. Returns ``(tokens, parents)`` tensors.
    """
    t = len(trunk)
    full = list(range(-1, t - 1)) + [t - 1 if p < 0 else t + p for p in parents]
    return torch.tensor(trunk + drafted), torch.tensor(full)


def grow_tree(
    draft: Transformer, caches: list[KVCache], trunk: list[int], branching: tuple
) -> tuple[list[int], list[int], int]:
    """The draft's token tree: its top-``b_i`` tokens after each node of depth ``i-1``.

    Returns:
        ``(tokens, parents, fed)``: the drafted nodes, their parents among them
        (``-1``: child of the trunk), and how many were fed to the draft (all but
        the last level), whose keys and values its caches now hold after the trunk.
    """
    start = caches[0].length
    tokens: list[int] = []
    parents: list[int] = []
    frontier = [-1]  # nodes whose children come next; -1 is the trunk's last token
    for b in branching:
        rollback(caches, start)
        fed = len(tokens)
        logits = tree_forward(draft, caches, *with_trunk(trunk, tokens, parents))
        nxt = []
        for node in frontier:
            row = logits[len(trunk) - 1 if node < 0 else len(trunk) + node]  # (V,)
            for tok in row.topk(b).indices.tolist():
                tokens.append(tok)
                parents.append(node)
                nxt.append(len(tokens) - 1)
        frontier = nxt
    return tokens, parents, fed


def greedy_walk(
    logits: Tensor, t: int, drafted: list[int], parents: list[int]
) -> tuple[list[int], int]:
    """Follow the target's argmax down the tree from the trunk's last token.

    Args:
        logits: the target's logits after each node of the whole tree, ``(t + n, V)``.
        t: trunk tokens before the drafted nodes.
        drafted: the drafted nodes' tokens.
        parents: their parents among them (``-1``: the trunk's last token).

    Returns:
        The accepted drafted nodes, root first, and the target's token after them.
    """
    node, path = -1, []
    while True:
        want = int(logits[t - 1 if node < 0 else t + node].argmax())  # after node
        child = [c for c, p in enumerate(parents) if p == node and drafted[c] == want]
        if not child:
            return path, want
        node = child[0]
        path.append(node)


@dataclass(frozen=True)
class TreeResult:
    """What :func:`tree_speculative_generate` returns.

    Args:
        tokens: prompt and new tokens, ``(1, T + max_new_tokens)``.
        target_calls: forward passes of the target (the prompt's included).
        accepted: drafted tokens kept.
        tree_size: drafted nodes per round.
    """

    tokens: Tensor
    target_calls: int
    accepted: int
    tree_size: int


def tree_size(branching: tuple[int, ...]) -> int:
    """Drafted nodes of a tree: ``b_1 + b_1 b_2 + ... + b_1 ... b_D``."""
    return sum(math.prod(branching[: i + 1]) for i in range(len(branching)))


@torch.no_grad()
def tree_speculative_generate(
    target: Transformer,
    draft: Transformer,
    prompt: Tensor,
    max_new_tokens: int,
    branching: tuple[int, ...],
) -> TreeResult:
    """Greedy decoding of ``target``, the draft proposing a token tree per round.

    Args:
        target: the model whose greedy output is produced.
        draft: a cheaper model with the same vocabulary.
        prompt: token ids, ``(1, T)``.
        max_new_tokens: tokens to append, ``>= 1``.
        branching: children per node at each depth, ``(b_1, ..., b_D)``, each
            ``>= 1``; ``(1,) * k`` is a chain of ``k``.

    Returns:
        The tokens, equal to the target's greedy decoding, and the counts.

    Raises:
        TypeError: a model is not a Transformer.
        ValueError: a bad ``prompt``, ``max_new_tokens``, ``branching``, or a
            sequence too long for a model.
    """
    for name, model in (("target", target), ("draft", draft)):
        if not isinstance(model, Transformer):
            raise TypeError(f"{name} must be a Transformer, got {type(model)}")
    if prompt.dim() != 2 or prompt.shape[0] != 1 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be (1, T), T >= 1, got {tuple(prompt.shape)}")
    checks.positive_int("max_new_tokens", max_new_tokens)
    if not branching or any(not isinstance(b, int) or b < 1 for b in branching):
        raise ValueError(f"branching must be ints >= 1, got {branching!r}")
    T, n = prompt.shape[1], tree_size(branching)
    size = T + max_new_tokens + n  # prefix, trunk and tree: the most ever cached
    for name, model in (("target", target), ("draft", draft)):
        if size > model.config.max_seq_len:
            raise ValueError(
                f"prompt + max_new_tokens + tree = {size} > {name}'s "
                f"max_seq_len {model.config.max_seq_len}"
            )
    caches_t, caches_d = target.new_caches(1, size), draft.new_caches(1, size)
    seq, calls, accepted = prompt[0].tolist(), 0, 0
    while len(seq) < T + max_new_tokens:
        # region round
        start_d, trunk_d = caches_d[0].length, seq[caches_d[0].length :]
        drafted, parents, fed = grow_tree(draft, caches_d, trunk_d, branching)
        start, trunk = caches_t[0].length, seq[caches_t[0].length :]
        logits = tree_forward(target, caches_t, *with_trunk(trunk, drafted, parents))
        path, last = greedy_walk(logits, len(trunk), drafted, parents)
        seq += [drafted[c] for c in path] + [last]  # accepted, then the target's own
        t, t_d = len(trunk), len(trunk_d)  # keep the trunks and the accepted nodes
        keep_path(caches_t, start, [*range(t), *(t + c for c in path)])
        keep_path(caches_d, start_d, [*range(t_d), *(t_d + c for c in path if c < fed)])
        # endregion
        calls, accepted = calls + 1, accepted + len(path)
    out = torch.tensor(seq[: T + max_new_tokens])[None]
    return TreeResult(out, calls, accepted, n)
