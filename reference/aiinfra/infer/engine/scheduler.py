"""The scheduler of the engine: requests, their state, and each iteration's batch.

Static batching runs a batch until its longest request ends; *continuous* batching
(Orca, Yu et al. 2022) rebuilds the batch at every iteration, so a request joins as
soon as there is room and leaves as soon as it ends. :meth:`Scheduler.schedule` picks
the work of one iteration under two limits, a token budget
``max_num_batched_tokens`` and ``max_num_seqs`` sequences: first the running
sequences (one token per decode), then *chunks* of waiting prompts (chunked prefill,
Agrawal et al. 2024, Sarathi-Serve), so that a long prompt never stalls the decodes
for a whole prefill. KV memory is counted in blocks of a
:class:`~aiinfra.infer.paged.block_allocator.BlockAllocator` (vLLM, Kwon et al. 2023): a
chunk runs only if its blocks are free, and when a running sequence finds no free
block the most recently admitted one is *preempted by recomputation*: its blocks
are freed and it goes back to the front of the queue, its generated tokens now part
of what it must prefill again (vLLM's default). With prefix caching, a request is
admitted with the cached blocks of the longest prefix it shares with earlier ones,
and only the rest of its prompt runs.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from aiinfra import checks
from aiinfra.checks import is_int
from aiinfra.infer.paged.block_allocator import BlockAllocator

SEED_MIN, SEED_MAX = -(1 << 63), (1 << 64) - 1  # what torch.Generator takes


class RequestError(ValueError):
    """A request the engine cannot serve; ``param`` names the offending field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class SamplingParams:
    """How one request is decoded (the OpenAI fields of the same names).

    Raises:
        TypeError: ``temperature`` or ``top_p`` is not a number.
        RequestError: ``max_tokens < 1``, ``temperature < 0``, ``top_p`` outside
            ``(0, 1]``, ``top_k < 1``, a negative stop token id or a seed beyond
            64 bits.
    """

    max_tokens: int = 16
    temperature: float = 0.0  # 0: greedy
    top_p: float = 1.0
    top_k: int | None = None
    seed: int | None = None  # None: a nondeterministic generator
    stop_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not checks.is_number(value):
                raise TypeError(f"{name} must be a number, got {value!r}")
        rules = (
            ("max_tokens", is_int(self.max_tokens) and self.max_tokens >= 1, ">= 1"),
            ("temperature", self.temperature >= 0, ">= 0"),
            ("top_p", 0 < self.top_p <= 1, "in (0, 1]"),
            ("top_k", self.top_k is None or self.top_k >= 1, ">= 1 or None"),
            ("stop_token_ids", all(t >= 0 for t in self.stop_token_ids), ">= 0"),
            (
                "seed",
                self.seed is None
                or is_int(self.seed)
                and SEED_MIN <= self.seed <= SEED_MAX,
                f"None or an int in [{SEED_MIN}, {SEED_MAX}]",
            ),
        )
        for name, ok, rule in rules:
            if not ok:
                raise RequestError(
                    f"{name} must be {rule}, got {str(getattr(self, name))[:40]}", name
                )


@dataclass(eq=False)
class SequenceState:
    """One request inside the engine: its tokens, its cache and its timestamps.

    ``prompt + output`` are the sequence's tokens; the first ``num_computed`` of them
    have keys and values in the blocks the allocator gave it (``num_cached`` of
    those came from the prefix cache at admission).
    """

    seq_id: int
    request_id: str
    prompt: list[int]
    params: SamplingParams
    arrival_time: float
    generator: torch.Generator
    output: list[int] = field(default_factory=list)
    num_computed: int = 0
    num_cached: int = 0
    first_token_time: float | None = None
    finish_time: float | None = None
    finish_reason: str | None = None  # "length", "stop" or "abort"
    num_preemptions: int = 0

    @property
    def tokens(self) -> list[int]:
        """Prompt then generated tokens (what a recomputation prefills)."""
        return self.prompt + self.output

    def token_slice(self, start: int, end: int) -> list[int]:
        """``tokens[start:end]`` without building the whole list."""
        P = len(self.prompt)
        if start >= P:
            return self.output[start - P : end - P]
        if end <= P:
            return self.prompt[start:end]
        return self.prompt[start:] + self.output[: end - P]

    @property
    def num_pending(self) -> int:
        """Tokens still to run through the model: 1 while decoding, more in prefill."""
        return len(self.prompt) + len(self.output) - self.num_computed

    @property
    def ttft(self) -> float | None:
        """Time to first token, seconds from arrival."""
        return (
            None
            if self.first_token_time is None
            else self.first_token_time - self.arrival_time
        )

    @property
    def tpot(self) -> float | None:
        """Mean time per output token after the first, seconds."""
        if (
            self.finish_time is None
            or self.first_token_time is None
            or len(self.output) < 2
        ):
            return None
        return (self.finish_time - self.first_token_time) / (len(self.output) - 1)


class Scheduler:
    """Chooses each iteration's work: decodes first, then prompt chunks, within budgets.

    Args:
        allocator: the block pool that governs admission and preemption.
        max_num_seqs: sequences running at once.
        max_num_batched_tokens: tokens (decodes plus prompt chunks) per iteration.
        chunked_prefill: split prompts over iterations; otherwise a prompt is
            scheduled whole or not at all.
    """

    def __init__(
        self,
        allocator: BlockAllocator,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        chunked_prefill: bool = True,
    ) -> None:
        checks.positive_ints(
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
        )
        self.allocator, self.chunked_prefill = allocator, chunked_prefill
        self.max_num_seqs, self.max_num_batched_tokens = (
            max_num_seqs,
            max_num_batched_tokens,
        )
        self.waiting: deque[SequenceState] = deque()
        self.running: list[SequenceState] = []  # in admission order
        self.num_preemptions = 0
        self.num_cached_tokens = 0  # prompt tokens taken from the prefix cache
        self.copies: list[tuple[int, int]] = []  # copy-on-write, for the engine

    def _blocks_needed(self, seq: SequenceState, n: int) -> int:
        b = self.allocator.block_size
        return -(-(seq.num_computed + n) // b) - -(-seq.num_computed // b)

    def _reserve(self, seq: SequenceState, n: int) -> None:
        for t in seq.token_slice(seq.num_computed, seq.num_computed + n):
            copy = self.allocator.append(seq.seq_id, t)
            if copy is not None:
                self.copies.append(copy)

    def _admit(self, seq: SequenceState, budget: int) -> int:
        """Admit ``seq`` with its prefix-cache hit and a first chunk; 0 if it waits."""
        a, b, tokens = self.allocator, self.allocator.block_size, seq.tokens
        # region admit
        hit = a.cached_prefix(tokens[:-1])  # the last token is always recomputed
        n_hit = len(hit) * b
        n = min(len(tokens) - n_hit, budget)
        if n < len(tokens) - n_hit and not self.chunked_prefill:
            return 0
        if a.blocks_to_take(hit) + -(-(n_hit + n) // b) - len(hit) > a.num_free_blocks:
            return 0
        a.allocate(seq.seq_id, tokens[: n_hit + n], max_cached_blocks=len(hit))
        seq.num_computed = seq.num_cached = n_hit  # cached tokens are not run again
        self.num_cached_tokens += n_hit
        # endregion
        return n

    def preempt(self, seq: SequenceState) -> None:
        """Free ``seq``'s blocks and cache; it will prefill prompt + output again."""
        self.running.remove(seq)
        if seq.seq_id in self.allocator.block_tables:
            self.allocator.free(seq.seq_id)
        seq.num_computed = 0
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def schedule(self) -> list[tuple[SequenceState, int]]:
        """One iteration's batch as ``(sequence, tokens to run)`` pairs.

        The blocks of every pair are reserved in the allocator; running sequences
        come first (preempting the latest admitted when blocks run out), then
        waiting ones, unless this iteration preempted.
        """
        budget, batch, preempted = self.max_num_batched_tokens, [], False
        for seq in list(self.running):
            if seq not in self.running or budget == 0:
                continue
            n = min(seq.num_pending, budget)
            while self._blocks_needed(seq, n) > self.allocator.num_free_blocks:
                victim = self.running[-1]  # the most recently admitted
                self.preempt(victim)
                preempted = True
                if victim is seq:
                    break
            if seq in self.running:
                self._reserve(seq, n)
                batch.append((seq, n))
                budget -= n
        while self.waiting and budget > 0 and not preempted:
            seq = self.waiting[0]
            if len(self.running) >= self.max_num_seqs:
                break
            n = self._admit(seq, budget)
            if n == 0:
                break
            self.waiting.popleft()
            self.running.append(seq)
            batch.append((seq, n))
            budget -= n
        return batch

    def finish(self, seq: SequenceState) -> None:
        """Drop a finished or aborted sequence and return its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        if seq.seq_id in self.allocator.block_tables:
            self.allocator.free(seq.seq_id)
