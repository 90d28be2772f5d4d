"""Streaming KV caches against full attention masked and positioned by hand."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from aiinfra.infer.kv.eviction import (
    StreamingCache,
    check_budget,
    kept_tokens,
    streaming_nll,
    streaming_step,
)
from aiinfra.models.config import TransformerConfig
from aiinfra.models.transformer import Transformer

CONFIG = TransformerConfig(
    vocab_size=37,
    d_model=32,
    n_layers=2,
    n_heads=4,
    n_kv_heads=2,
    d_ff=48,
    max_seq_len=64,
)


def _model(config=CONFIG, seed=0):
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    with torch.no_grad():  # larger weights than the init: attention far from uniform
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    return model


def _decode(model, tokens, budget, sinks):
    """Logits ``(B, T, V)`` of every position, decoded one token at a time."""
    caches = [StreamingCache(budget, sinks) for _ in model.blocks]
    out = [
        streaming_step(model, tokens[:, t : t + 1], caches)[0]
        for t in range(tokens.shape[1])
    ]
    return torch.stack(out, dim=1)


def test_kept_tokens_are_the_sinks_and_the_latest():
    assert kept_tokens(4, 6, 2) == [0, 1, 2, 3]
    assert kept_tokens(10, 6, 2) == [0, 1, 6, 7, 8, 9]
    assert kept_tokens(10, 3, 0) == [7, 8, 9]


def test_cache_keeps_the_sinks_and_the_slots_of_the_kept_tokens():
    cache = StreamingCache(budget=5, sinks=2)
    rows = torch.arange(9.0).view(1, 1, 9, 1).expand(1, 2, 9, 3)  # row t holds t
    for t in range(9):
        k, v = cache.append(rows[:, :, t : t + 1], -rows[:, :, t : t + 1])
    assert cache.tokens == [0, 1, 6, 7, 8] == kept_tokens(9, 5, 2)
    assert k[0, 0, :, 0].tolist() == [0, 1, 6, 7, 8]
    assert v[0, 1, :, 2].tolist() == [0, -1, -6, -7, -8]


def test_full_budget_equals_the_model_forward():
    model = _model()
    tokens = torch.randint(0, CONFIG.vocab_size, (3, 20))
    torch.testing.assert_close(_decode(model, tokens, 20, 0), model(tokens))
    nll, mass = streaming_nll(model, tokens, 20, 0)
    ref = F.cross_entropy(
        model(tokens[:, :-1]).transpose(1, 2), tokens[:, 1:], reduction="none"
    )
    torch.testing.assert_close(nll, ref)
    assert mass.shape == (19, 2) and mass[0].tolist() == [1.0, 1.0]  # one slot


@pytest.mark.parametrize("window", [1, 4, 7])
def test_sliding_window_equals_mistral_masked_attention(window):
    """Positions in the cache or in the text: RoPE sees the same distances."""
    model = _model()
    masked = Transformer(dataclasses.replace(CONFIG, sliding_window=window)).eval()
    masked.load_state_dict(model.state_dict())
    tokens = torch.randint(0, CONFIG.vocab_size, (2, 23))
    torch.testing.assert_close(_decode(model, tokens, window, 0), masked(tokens))


def _sink_reference(model, tokens, budget, sinks, in_cache=True):
    """One layer: each query attends (SDPA) to the kept tokens, rotated by hand."""
    block, (B, T) = model.blocks[0], tokens.shape
    attn, H, G, D = block.attn, block.attn.n_heads, block.attn.n_kv_heads, 8
    x = model.embed(tokens)  # (B, T, h)
    h = block.attn_norm(x)
    q = attn.wq(h).view(B, T, H, D).transpose(1, 2)  # (B, H, T, d), not rotated
    k = attn.wk(h).view(B, T, G, D).transpose(1, 2)
    v = attn.wv(h).view(B, T, G, D).transpose(1, 2)
    outs = []
    for t in range(T):
        idx = torch.tensor(kept_tokens(t + 1, budget, sinks))
        pos = torch.arange(len(idx)) if in_cache else idx  # the point of the test
        k_t = attn.rope(k[:, :, idx], positions=pos)
        q_t = attn.rope(q[:, :, t : t + 1], positions=pos[-1:])
        outs.append(
            F.scaled_dot_product_attention(q_t, k_t, v[:, :, idx], enable_gqa=True)
        )
    o = torch.cat(outs, dim=2).transpose(1, 2).reshape(B, T, H * D)
    x = x + attn.wo(o)
    x = x + block.mlp(block.mlp_norm(x))
    return model.head(model.norm(x))


@pytest.mark.parametrize("budget, sinks", [(6, 1), (8, 4), (5, 4)])
def test_sinks_attend_at_positions_within_the_cache(budget, sinks):
    model = _model(dataclasses.replace(CONFIG, n_layers=1))
    tokens = torch.randint(0, CONFIG.vocab_size, (2, 21))
    got = _decode(model, tokens, budget, sinks)
    with torch.no_grad():
        torch.testing.assert_close(got, _sink_reference(model, tokens, budget, sinks))
        text_positions = _sink_reference(model, tokens, budget, sinks, in_cache=False)
    assert not torch.allclose(got[:, budget + 1 :], text_positions[:, budget + 1 :])


@pytest.mark.parametrize(
    "budget, sinks, name",
    [(0, 0, "budget"), (4, -1, "sinks"), (4, 4, "sinks"), (2.5, 0, "budget")],
)
def test_bad_budget_raises_naming_the_argument(budget, sinks, name):
    with pytest.raises(ValueError, match=name):
        check_budget(budget, sinks)
    with pytest.raises(ValueError, match=name):
        StreamingCache(budget, sinks)


def test_bad_model_and_tokens_raise():
    learned = _model(dataclasses.replace(CONFIG, position="learned"))
    with pytest.raises(ValueError, match="model"):
        streaming_step(
            learned, torch.zeros(1, 1, dtype=torch.long), [StreamingCache(4, 1)] * 2
        )
    model = _model()
    with pytest.raises(ValueError, match="token"):
        streaming_step(
            model, torch.zeros(1, 2, dtype=torch.long), [StreamingCache(4, 1)] * 2
        )
    with pytest.raises(ValueError, match="caches"):
        streaming_step(model, torch.zeros(1, 1, dtype=torch.long), [])
    with pytest.raises(ValueError, match="tokens"):
        streaming_nll(model, torch.zeros(1, 1, dtype=torch.long), 4, 1)
