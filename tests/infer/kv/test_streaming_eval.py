"""The copy language of the eviction measurement, and its configuration's checks."""

import math

import pytest
import torch
from aiinfra.infer.kv.streaming_eval import (
    StreamingEvalConfig,
    sample_copy_language,
    true_nll,
)


def _table(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    V = cfg.model.vocab_size
    return torch.rand(V, V, generator=g).topk(cfg.successors, -1).indices, g


def test_always_copying_repeats_the_token_lag_back():
    cfg = StreamingEvalConfig(p_copy=1.0, lag=5, seq_len=20)
    table, g = _table(cfg)
    x = sample_copy_language(table, 8, cfg, g)
    assert torch.equal(x[:, 5:], x[:, :-5])
    # The first lag - 1 predictions follow the table, the rest are certain.
    zipf = torch.tensor([1, 1 / 2, 1 / 3]) / (1 + 1 / 2 + 1 / 3)
    rank = (table[x[:, :4]] == x[:, 1:5, None]).float().argmax(-1)  # (8, 4)
    by_hand = -zipf[rank].log().sum() / (8 * 19)
    assert true_nll(table, x, cfg) == pytest.approx(float(by_hand), rel=1e-6)


def test_never_copying_follows_the_table_alone():
    cfg = StreamingEvalConfig(p_copy=0.0, successors=1, lag=4, seq_len=12)
    table, g = _table(cfg)
    x = sample_copy_language(table, 4, cfg, g)
    assert torch.equal(x[:, 1:], table[x[:, :-1], 0])
    assert true_nll(table, x, cfg) == 0.0
    assert math.isfinite(true_nll(table, x, cfg))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"p_copy": 1.5}, "p_copy"),
        ({"lag": 64}, "lag"),
        ({"steps": 0}, "steps"),
        ({"budgets": (8, 4)}, "sinks"),
        ({"budgets": (0,)}, "budget"),
    ],
)
def test_bad_config_raises_naming_the_field(kwargs, name):
    with pytest.raises(ValueError, match=name):
        StreamingEvalConfig(**kwargs)
