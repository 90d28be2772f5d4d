"""Data loading: fixed-length windows of a memory-mapped token file.

Pre-training data is tokenized once, offline, into one flat array of token ids on
disk (``uint16`` while the vocabulary fits in 65,536 ids, else ``uint32``), as
nanoGPT's ``train.bin``. Training maps the file into memory (``numpy.memmap``) and
reads windows of T + 1 tokens: the first T are the input, the last T, shifted by
one, the targets. Nothing is parsed at training time and the page cache, not the
process, holds the file, so worker processes share it for free. Whether loading
keeps up is a rate comparison: a step of B sequences of T tokens taking t seconds
needs B T / t tokens per second from the loader.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned dtype that holds ids ``0 .. vocab_size - 1``.

    Raises:
        ValueError: ``vocab_size`` < 1 or above 2^32.
    """
    if not isinstance(vocab_size, int) or not 1 <= vocab_size <= 2**32:
        raise ValueError(f"vocab_size must be an int in [1, 2^32], got {vocab_size!r}")
    return np.dtype(np.uint16 if vocab_size <= 2**16 else np.uint32)


def write_token_file(
    path: str | os.PathLike, tokens: np.ndarray, vocab_size: int
) -> np.dtype:
    """Write token ids to a flat binary file, as :class:`TokenWindows` reads them.

    Args:
        path: the file to write.
        tokens: 1-D integer array of ids in ``[0, vocab_size)``.
        vocab_size: V; chooses the dtype (:func:`token_dtype`).

    Returns:
        The dtype written.

    Raises:
        ValueError: ``tokens`` is not 1-D integers in ``[0, vocab_size)``.
    """
    dtype = token_dtype(vocab_size)
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(
            f"tokens must be a 1-D integer array, got {tokens.dtype} {tokens.shape}"
        )
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(f"tokens must lie in [0, vocab_size = {vocab_size})")
    tokens.astype(dtype).tofile(path)
    return dtype


class TokenWindows(Dataset):
    """Non-overlapping windows of ``seq_len + 1`` tokens of a token file.

    Item i is ``(x, y)``: x the tokens ``[i T, (i + 1) T)``, y the same shifted by
    one, both int64 of shape ``(T,)``. The file is opened lazily in each process,
    so a ``DataLoader`` worker maps it itself instead of receiving a pickled copy.

    Args:
        path: a file written by :func:`write_token_file`.
        seq_len: T, tokens per sequence.
        dtype: the file's dtype (``numpy.uint16`` or ``numpy.uint32``).

    Raises:
        FileNotFoundError: ``path`` is not a file.
        ValueError: ``seq_len`` < 1, the file size is not a multiple of the dtype's
            size, or the file holds fewer than ``seq_len + 1`` tokens.
    """

    def __init__(self, path: str | os.PathLike, seq_len: int, dtype: np.dtype) -> None:
        self.path, self.dtype = Path(path), np.dtype(dtype)
        if not self.path.is_file():
            raise FileNotFoundError(f"path {str(self.path)!r} is not a file")
        if not isinstance(seq_len, int) or seq_len < 1:
            raise ValueError(f"seq_len must be an int >= 1, got {seq_len!r}")
        size = self.path.stat().st_size
        if size % self.dtype.itemsize:
            raise ValueError(
                f"dtype {self.dtype} does not fit path: {size} bytes is not a "
                f"multiple of {self.dtype.itemsize}"
            )
        self.n_tokens, self.seq_len = size // self.dtype.itemsize, seq_len
        if self.n_tokens < seq_len + 1:
            raise ValueError(
                f"seq_len + 1 = {seq_len + 1} tokens is longer than the file "
                f"({self.n_tokens} tokens)"
            )
        self._tokens: np.memmap | None = None

    def __len__(self) -> int:
        return (self.n_tokens - 1) // self.seq_len

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not 0 <= i < len(self):
            raise IndexError(f"window {i} out of range [0, {len(self)})")
        if self._tokens is None:
            self._tokens = np.memmap(self.path, dtype=self.dtype, mode="r")
        start = i * self.seq_len
        window = torch.from_numpy(
            self._tokens[start : start + self.seq_len + 1].astype(np.int64)
        )  # (T + 1,)
        return window[:-1], window[1:]  # (T,), (T,)


@dataclass(frozen=True)
class LoaderThroughput:
    """A loader's measured rate against the rate training consumes tokens.

    Attributes:
        num_workers: the ``DataLoader``'s worker processes.
        loader_tokens_per_s: tokens per second the loader delivered (measured).
        needed_tokens_per_s: tokens per step / step time.
    """

    num_workers: int
    loader_tokens_per_s: float
    needed_tokens_per_s: float

    @property
    def keeps_up(self) -> bool:
        """Whether the loader delivers at least what training consumes."""
        return self.loader_tokens_per_s >= self.needed_tokens_per_s


def loader_throughput(
    dataset: TokenWindows,
    batch_size: int,
    num_workers: int,
    tokens_per_step: int,
    step_seconds: float,
    batches: int = 50,
) -> LoaderThroughput:
    """Measure tokens/s of a real ``DataLoader`` over ``dataset``.

    The clock starts at the first batch, so the workers' start-up is not counted.

    Args:
        dataset: the windows to load (shuffled, as training reads them).
        batch_size: B, sequences per batch.
        num_workers: worker processes, 0 to load in this process.
        tokens_per_step: tokens one training step consumes (global batch B T).
        step_seconds: t, wall time of one training step.
        batches: batches to time after the first, >= 1.

    Returns:
        The measured and the needed rate.

    Raises:
        ValueError: ``batch_size``, ``batches``, ``tokens_per_step`` < 1,
            ``num_workers`` < 0, ``step_seconds`` <= 0, or the dataset holds fewer
            than ``batches + 1`` batches.
    """
    for name, value, low in [
        ("batch_size", batch_size, 1),
        ("num_workers", num_workers, 0),
        ("tokens_per_step", tokens_per_step, 1),
        ("batches", batches, 1),
    ]:
        if not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if not step_seconds > 0:
        raise ValueError(f"step_seconds must be > 0, got {step_seconds!r}")
    if len(dataset) < (batches + 1) * batch_size:
        raise ValueError(
            f"dataset has {len(dataset)} windows, fewer than (batches + 1) * "
            f"batch_size = {(batches + 1) * batch_size}"
        )
    generator = torch.Generator().manual_seed(0)  # the shuffle order, not global
    loader = DataLoader(
        dataset, batch_size, shuffle=True, num_workers=num_workers, generator=generator
    )
    it = iter(loader)
    next(it)  # workers started, first batch in
    tokens, start = 0, time.perf_counter()
    for _ in range(batches):
        x, _ = next(it)  # (B, T)
        tokens += x.numel()
    seconds = time.perf_counter() - start
    del it  # shuts the workers down
    return LoaderThroughput(
        num_workers, tokens / seconds, tokens_per_step / step_seconds
    )
