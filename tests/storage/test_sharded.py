import pytest
import torch
import torch.distributed.checkpoint as dcp
from aiinfra.storage import optimizer_state_bytes, reshard, saved_widths
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from tests.storage.spawned import STEPS, WIDTHS, reference_state


def assert_matches(loaded, expected):
    assert sorted(loaded) == sorted(expected)
    for k, v in expected.items():
        torch.testing.assert_close(loaded[k], v, rtol=1e-5, atol=1e-6, msg=k)


@pytest.mark.slow
def test_four_ranks_hold_uneven_row_shards(saved):
    # torch.chunk's split of 10 and 5 rows over 4 ranks: 3, 3, 3, 1 and 2, 2, 1, 0.
    shapes = [rank["shapes"] for rank in saved]
    assert [s["0.weight"] for s in shapes] == [(3, 6), (3, 6), (3, 6), (1, 6)]
    assert [s["2.weight"] for s in shapes] == [(2, 10), (2, 10), (1, 10), (0, 10)]
    assert [s["2.bias"] for s in shapes] == [(2,), (2,), (1,), (0,)]


@pytest.mark.slow
def test_saved_tensors_are_12_bytes_per_parameter_for_fp32_adam(root, saved):
    # DCP's own record of what it wrote: fp32 weights, m and v; step is a counter.
    meta = dcp.FileSystemReader(root / "sharded").read_metadata().state_dict_metadata
    n_bytes = sum(
        m.size.numel() * m.properties.dtype.itemsize
        for k, m in meta.items()
        if isinstance(m, TensorStorageMetadata) and not k.endswith(".step")
    )
    psi = 6 * 10 + 10 + 10 * 5 + 5
    assert n_bytes == (4 + optimizer_state_bytes("adam", "fp32")) * psi == 1500
    assert saved_widths(root / "sharded") == list(WIDTHS)


@pytest.mark.slow
def test_two_ranks_load_the_four_rank_checkpoint(loaded2):
    assert_matches(loaded2["sharded"], reference_state(STEPS))


@pytest.mark.slow
def test_three_ranks_load_the_four_rank_checkpoint(loaded3):
    assert_matches(loaded3, reference_state(STEPS))


def test_reshard_rejects_bad_input_before_spawning(tmp_path):
    with pytest.raises(ValueError, match="world_size"):
        reshard(str(tmp_path), 0)
    with pytest.raises(FileNotFoundError, match="checkpoint_dir"):
        reshard(str(tmp_path / "missing"), 2)
