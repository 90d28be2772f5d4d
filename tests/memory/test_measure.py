"""SavedTensorLog: storages counted once, model states skipped, releases tracked."""

import torch
from aiinfra.memory.measure import SavedTensorLog


def test_a_storage_saved_twice_is_counted_once():
    x = torch.randn(4, 8, requires_grad=True)
    with SavedTensorLog() as log:
        y = (x * x).sum()  # mul saves x as both operands
    assert len(log.entries) == 2
    assert log.total_bytes == x.numel() * 4
    assert [e.new_storage for e in log.entries] == [True, False]
    del y


def test_a_saved_view_keeps_its_whole_storage():
    base = torch.randn(10, 8, requires_grad=True)
    with SavedTensorLog() as log:
        y = base[:2].exp().sum()  # exp saves its output, a fresh (2, 8) storage
        z = (base[:2] * 3.0).sum() + torch.mm(base.t()[:, :1].t(), base.t()).sum()
    assert log.entries[0].storage_bytes == 2 * 8 * 4
    assert any(e.storage_bytes == 10 * 8 * 4 for e in log.entries)  # views of base
    del y, z


def test_parameters_are_excluded_and_live_bytes_return_to_zero():
    layer = torch.nn.Linear(8, 8)
    x = torch.randn(2, 8, requires_grad=True)
    with SavedTensorLog(exclude=layer.parameters()) as log:
        out = torch.tanh(layer(x)).sum()
        assert log.live_bytes == 2 * (2 * 8 * 4)  # x and tanh's output
        out.backward()
    assert log.live_bytes == 0
    assert log.peak_bytes == log.total_bytes == 2 * 2 * 8 * 4
