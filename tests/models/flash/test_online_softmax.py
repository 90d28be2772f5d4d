"""Online softmax (Milakov & Gimelshein 2018) equals softmax, in one pass."""

import pytest
import torch
from aiinfra.models.flash.online_softmax import merge, online_normalizer, online_softmax


@pytest.mark.parametrize("block_size", [1, 3, 16, 97])
def test_online_softmax_equals_torch_softmax(block_size):
    torch.manual_seed(0)
    x = 10 * torch.randn(4, 97, dtype=torch.float64)  # large scores: exp overflows
    torch.testing.assert_close(online_softmax(x, block_size), torch.softmax(x, dim=-1))


def test_normalizer_reads_each_block_once():
    torch.manual_seed(0)
    x = torch.randn(3, 50, dtype=torch.float64)
    reads = []

    def blocks():
        for j, block in enumerate(x.split(7, dim=-1)):
            reads.append(j)
            yield block

    m, d = online_normalizer(blocks())  # a generator can be iterated only once
    assert reads == list(range(8))
    torch.testing.assert_close(m, x.amax(dim=-1))
    torch.testing.assert_close(m + d.log(), torch.logsumexp(x, dim=-1))


def test_merging_states_in_any_order_gives_the_logsumexp():
    torch.manual_seed(0)
    parts = [torch.randn(5, n, dtype=torch.float64) for n in (4, 9, 2)]
    states = [
        (p.amax(-1), torch.exp(p - p.amax(-1, keepdim=True)).sum(-1)) for p in parts
    ]
    left = merge(*merge(*states[0], *states[1]), *states[2])
    right = merge(*states[2], *merge(*states[1], *states[0]))
    expected = torch.logsumexp(torch.cat(parts, dim=-1), dim=-1)
    for m, d in (left, right):
        torch.testing.assert_close(m + d.log(), expected)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        online_softmax(torch.randn(4), block_size=0)
    with pytest.raises(ValueError, match="non-empty last dimension"):
        online_softmax(torch.randn(3, 0))
    with pytest.raises(ValueError, match="blocks is empty"):
        online_normalizer(iter([]))
