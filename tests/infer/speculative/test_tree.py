"""Tree speculation: the mask, the cache compaction, and greedy exactness."""

from __future__ import annotations

import pytest
import torch
from aiinfra.infer.speculative.toys import noisy_copy, scaled_model
from aiinfra.infer.speculative.tree import (
    keep_path,
    tree_depths,
    tree_forward,
    tree_mask,
    tree_size,
    tree_speculative_generate,
)
from aiinfra.models.transformer import Transformer, generate_greedy

SHAPE = {
    "vocab_size": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "d_ff": 64,
    "max_seq_len": 96,
}


def _model(seed: int, scale: float = 5.0, **shape: object) -> Transformer:
    """A small random model; ``scale`` sharpens its laws (no early cycles)."""
    return scaled_model(seed, scale, **(SHAPE | shape))


def test_tree_mask_by_hand() -> None:
    # 0 -> 1 -> 3, 0 -> 2: node 3 sees 0, 1, 3; node 2 sees 0, 2
    parents = torch.tensor([-1, 0, 0, 1])
    want = torch.tensor(
        [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]], dtype=torch.bool
    )
    assert torch.equal(tree_mask(parents), want)
    assert tree_depths(parents).tolist() == [0, 1, 1, 2]
    assert tree_size((3, 2, 1)) == 3 + 6 + 6


def test_tree_mask_rejects_a_later_parent() -> None:
    with pytest.raises(ValueError, match="parents"):
        tree_mask(torch.tensor([-1, 2, 0]))


@pytest.mark.parametrize("position", ["rope", "learned"])
def test_each_node_gets_the_logits_of_its_own_path(position: str) -> None:
    """One pass over a tree equals a cached pass over each root-to-node sequence."""
    model = _model(0, scale=1.0, position=position)
    prefix = torch.tensor([[3, 7, 1, 4, 4]])
    tokens = torch.tensor([9, 2, 5, 11, 6, 8])
    parents = torch.tensor([-1, 0, 0, 1, 2, 2])
    caches = model.new_caches(1, 16)
    model(prefix, caches)
    logits = tree_forward(model, caches, tokens, parents)  # (n, V)
    for i in range(6):
        path, j = [], i
        while j >= 0:
            path.insert(0, int(tokens[j]))
            j = int(parents[j])
        full = model(torch.cat([prefix, torch.tensor([path])], dim=1))[0, -1]
        torch.testing.assert_close(logits[i], full, rtol=1e-4, atol=1e-4)


def test_keep_path_leaves_the_cache_of_the_accepted_sequence() -> None:
    model = _model(0, scale=1.0)
    prefix = torch.tensor([[3, 7, 1]])
    caches = model.new_caches(1, 16)
    model(prefix, caches)
    tree_forward(
        model, caches, torch.tensor([9, 2, 5, 11]), torch.tensor([-1, -1, 1, 2])
    )
    keep_path(caches, 3, [1, 2, 3])  # 2 -> 5 -> 11
    ref = model.new_caches(1, 16)
    model(torch.tensor([[3, 7, 1, 2, 5, 11]]), ref)
    for got, want in zip(caches, ref, strict=True):
        assert got.length == want.length == 6
        torch.testing.assert_close(got.k[:, :, :6], want.k[:, :, :6])
        torch.testing.assert_close(got.v[:, :, :6], want.v[:, :, :6])


@pytest.mark.parametrize("branching", [(1,), (1, 1, 1), (2, 2), (3, 2, 1), (4,)])
def test_tree_speculation_equals_greedy_decoding(branching: tuple[int, ...]) -> None:
    target = _model(0)
    draft = noisy_copy(target, 0.03)
    prompt = torch.tensor([[1, 5, 9, 3]])
    want = generate_greedy(target, prompt, 30)
    got = tree_speculative_generate(target, draft, prompt, 30, branching)
    assert torch.equal(got.tokens, want)
    assert 0 < got.accepted < 30  # some drafted tokens kept, not all
    # each call emits its accepted tokens and one of the target's own
    assert 30 <= got.accepted + got.target_calls <= 30 + tree_size(branching)


def test_a_wider_tree_accepts_at_least_as_much_here() -> None:
    target = _model(0)
    draft = noisy_copy(target, 0.05)
    prompt = torch.tensor([[1, 5, 9, 3]])
    chain = tree_speculative_generate(target, draft, prompt, 40, (1, 1, 1))
    tree = tree_speculative_generate(target, draft, prompt, 40, (3, 2, 1))
    assert tree.target_calls <= chain.target_calls


def test_the_target_as_its_own_draft_accepts_the_whole_chain() -> None:
    target = _model(0)
    got = tree_speculative_generate(
        target, target, torch.tensor([[1, 5]]), 12, (1, 1, 1)
    )
    assert got.target_calls == 3  # 4 tokens a round: 3 drafted and 1 of its own


def test_bad_input_is_refused() -> None:
    target = _model(0)
    with pytest.raises(ValueError, match="branching"):
        tree_speculative_generate(target, target, torch.tensor([[1]]), 4, (2, 0))
    with pytest.raises(ValueError, match="max_seq_len"):
        tree_speculative_generate(target, target, torch.tensor([[1]]), 90, (4, 4))
    with pytest.raises(TypeError, match="draft"):
        tree_speculative_generate(target, object(), torch.tensor([[1]]), 4, (2,))
    with pytest.raises(ValueError, match="prompt"):
        tree_speculative_generate(target, target, torch.tensor([1, 2]), 4, (2,))
