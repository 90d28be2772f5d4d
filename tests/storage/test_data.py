import numpy as np
import pytest
import torch
from aiinfra.storage import (
    TokenWindows,
    loader_throughput,
    token_dtype,
    write_token_file,
)
from torch.utils.data import DataLoader


def _tokens(n, vocab_size, seed=0):
    return np.random.default_rng(seed).integers(0, vocab_size, n)


@pytest.mark.parametrize(
    "vocab_size, itemsize", [(50_257, 2), (65_536, 2), (65_537, 4), (128_256, 4)]
)
def test_file_holds_the_tokens_in_the_smallest_dtype(tmp_path, vocab_size, itemsize):
    tokens = _tokens(1001, vocab_size)
    dtype = write_token_file(tmp_path / "t.bin", tokens, vocab_size)
    assert dtype.itemsize == itemsize
    assert (tmp_path / "t.bin").stat().st_size == 1001 * itemsize
    assert np.array_equal(np.fromfile(tmp_path / "t.bin", dtype), tokens)


def test_windows_are_the_slices_of_the_token_array(tmp_path):
    tokens = _tokens(1000, 128_256)  # uint32 ids above 65,535
    dtype = write_token_file(tmp_path / "t.bin", tokens, 128_256)
    ds = TokenWindows(tmp_path / "t.bin", seq_len=97, dtype=dtype)
    assert len(ds) == 10  # 10 windows of 97 + 1 tokens fit in 1,000
    for i in (0, 4, 9):
        x, y = ds[i]
        assert x.dtype == torch.int64 and x.shape == (97,)
        assert x.tolist() == tokens[97 * i : 97 * i + 97].tolist()
        assert y.tolist() == tokens[97 * i + 1 : 97 * i + 98].tolist()
    with pytest.raises(IndexError):
        ds[10]


def test_loader_with_two_workers_yields_every_window_once(tmp_path):
    tokens = _tokens(4097, 1000)
    dtype = write_token_file(tmp_path / "t.bin", tokens, 1000)
    ds = TokenWindows(tmp_path / "t.bin", seq_len=64, dtype=dtype)
    x = torch.cat([x for x, _ in DataLoader(ds, batch_size=8, num_workers=2)])
    assert x.flatten().tolist() == tokens[:4096].tolist()


def test_throughput_is_measured_and_compared_with_the_step_rate(tmp_path):
    dtype = write_token_file(tmp_path / "t.bin", _tokens(2**17, 50_257), 50_257)
    ds = TokenWindows(tmp_path / "t.bin", seq_len=256, dtype=dtype)
    # A step of 8 x 256 tokens every 0.5 s needs 4,096 tokens/s.
    for workers in (0, 2):
        r = loader_throughput(ds, 8, workers, tokens_per_step=2048, step_seconds=0.5)
        assert r.num_workers == workers
        assert r.needed_tokens_per_s == 4096
        assert r.loader_tokens_per_s > 0
        assert r.keeps_up == (r.loader_tokens_per_s >= 4096)
        print(f"num_workers={workers}: {r.loader_tokens_per_s:,.0f} tokens/s")


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        token_dtype(0)
    with pytest.raises(ValueError, match="tokens"):
        write_token_file(tmp_path / "t.bin", np.zeros((2, 2), np.int64), 10)
    with pytest.raises(ValueError, match="tokens must lie"):
        write_token_file(tmp_path / "t.bin", np.array([3, 10]), 10)
    with pytest.raises(FileNotFoundError, match="path"):
        TokenWindows(tmp_path / "missing.bin", 8, np.uint16)
    dtype = write_token_file(tmp_path / "t.bin", np.arange(9), 10)
    with pytest.raises(ValueError, match="seq_len"):
        TokenWindows(tmp_path / "t.bin", 0, dtype)
    with pytest.raises(ValueError, match="longer than the file"):
        TokenWindows(tmp_path / "t.bin", 9, dtype)  # 10 tokens needed, 9 there
    (tmp_path / "odd.bin").write_bytes(b"\0" * 7)
    with pytest.raises(ValueError, match="dtype"):
        TokenWindows(tmp_path / "odd.bin", 1, np.uint16)
    ds = TokenWindows(tmp_path / "t.bin", 2, dtype)
    for kwargs, name in [
        ({"batch_size": 0}, "batch_size"),
        ({"num_workers": -1}, "num_workers"),
        ({"tokens_per_step": 0}, "tokens_per_step"),
        ({"step_seconds": 0.0}, "step_seconds"),
        ({"batches": 0}, "batches"),
        ({"batches": 4}, "dataset has 4 windows"),
    ]:
        args = {"batch_size": 1, "num_workers": 0, "tokens_per_step": 1}
        args |= {"step_seconds": 1.0, "batches": 1} | kwargs
        with pytest.raises(ValueError, match=name):
            loader_throughput(ds, **args)
