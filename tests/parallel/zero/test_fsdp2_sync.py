"""FSDP2's traffic under gradient accumulation, counted in PyTorch's own run.

Ground truth: ``fully_shard`` itself on 2 gloo ranks, every all-gather and
reduce-scatter it issues counted (elements / Psi, Psi padded as FSDP2 pads dim 0),
and the hand count with k = 3 micro-batches: every micro-batch synced, 3 k = 9;
``set_requires_gradient_sync(False)`` skips only the reduce-scatters, 2 k + 1 = 7
(not 2, the gathers still run); parameters kept from forward to backward,
k + 1 = 4; kept across micro-batches too, 2.
"""

from __future__ import annotations

import pytest
from aiinfra.parallel.zero.fsdp2_sync import (
    FSDP2_SETTINGS,
    count_fsdp2_traffic,
    fsdp2_traffic,
)

HAND_COUNT_K3 = [9, 7, 4, 2]


def test_the_formula_is_the_hand_count():
    assert [fsdp2_traffic(name, 3) for name in FSDP2_SETTINGS] == HAND_COUNT_K3
    assert [fsdp2_traffic(name, 1) for name in FSDP2_SETTINGS] == [3, 3, 2, 2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("no_sync", 2), "setting must be one of"),
        ((next(iter(FSDP2_SETTINGS)), 0), "micro_batches"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, message):
    with pytest.raises(ValueError, match=message):
        fsdp2_traffic(*args)


@pytest.mark.slow
def test_fsdp2_sends_what_the_formula_says():
    counted = count_fsdp2_traffic(micro_batches=3, world_size=2)
    assert list(counted) == list(FSDP2_SETTINGS)
    assert list(counted.values()) == HAND_COUNT_K3
