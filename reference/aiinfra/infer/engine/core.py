"""An inference engine: continuous batching, chunked prefill, preemption.

:class:`Engine` runs the package's :class:`~aiinfra.models.transformer.Transformer`
over a stream of requests. Each :meth:`Engine.step` is one iteration: the
:class:`~aiinfra.infer.engine.scheduler.Scheduler` picks the decodes and prompt chunks
that fit the token budget and the free KV blocks (preempting by recomputation when a
decode finds none), the model runs each chunk, and every sequence whose chunk reached
its last token gets a new token, drawn by :func:`~aiinfra.infer.sampling.next_token`
with the request's own generator. The whole iteration is one forward pass of the
:class:`~aiinfra.infer.engine.model_runner.PagedModelRunner`: every sequence's new
tokens packed together, the keys and values in the blocks the allocator handed out, so
the blocks that decide admission are the memory the model reads. With prefix caching, a
prompt that starts with the full blocks of an earlier one reuses their keys and values.
Each request keeps its arrival, first-token and finish times (TTFT and TPOT).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from aiinfra.infer.engine.layout import Chunk
from aiinfra.infer.engine.model_runner import PagedModelRunner
from aiinfra.infer.engine.scheduler import (
    RequestError,
    SamplingParams,
    Scheduler,
    SequenceState,
    is_int,
)
from aiinfra.infer.paged.block_allocator import BlockAllocator
from aiinfra.infer.sampling import next_token
from aiinfra.models.transformer import Transformer

__all__ = ["Engine", "RequestError", "SamplingParams", "SequenceState", "StepOutput"]


@dataclass(frozen=True)
class StepOutput:
    """A token produced by a step; ``finish_reason`` is set on a request's last one."""

    request_id: str
    token: int
    finish_reason: str | None


class Engine:
    """Runs a :class:`Transformer` over a stream of requests, one iteration per step.

    Args:
        model: the language model (evaluation mode); its device holds the caches.
        num_blocks: KV blocks in the pool.
        block_size: tokens per block.
        max_num_seqs: sequences running at once.
        max_num_batched_tokens: tokens per iteration.
        chunked_prefill: split long prompts over iterations.
        enable_prefix_caching: reuse the cached blocks of a shared prompt prefix.
        clock: the time source of the timestamps (seconds).

    Raises:
        TypeError: ``model`` is not a :class:`Transformer`.
        ValueError: a size is not an int >= 1, or the model's attention is
            multi-head latent attention (the runner caches keys and values).
    """

    def __init__(
        self,
        model: Transformer,
        num_blocks: int = 64,
        block_size: int = 16,
        max_num_seqs: int = 8,
        max_num_batched_tokens: int = 64,
        chunked_prefill: bool = True,
        enable_prefix_caching: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(model, Transformer):
            raise TypeError(f"model must be an aiinfra Transformer, got {type(model)}")
        self.model, self.clock = model, clock
        allocator = BlockAllocator(num_blocks, block_size, enable_prefix_caching)
        self.scheduler = Scheduler(
            allocator, max_num_seqs, max_num_batched_tokens, chunked_prefill
        )
        self.runner = PagedModelRunner(model, num_blocks, block_size)
        self.requests: dict[str, SequenceState] = {}
        self.num_steps, self.batch_tokens = 0, []  # tokens run by each step
        self._next_id = 0

    def check_request(self, prompt: Sequence[int], params: SamplingParams) -> None:
        """Refuse a request that could never finish here (thread-safe, no change).

        Raises:
            RequestError: empty prompt, a token outside the vocabulary, prompt plus
                ``max_tokens`` longer than ``max_seq_len`` or than the whole pool, or
                a prompt over the token budget without chunked prefill.
        """
        cfg, s = self.model.config, self.scheduler
        if not isinstance(params, SamplingParams):
            raise TypeError(f"params must be SamplingParams, got {type(params)}")
        if len(prompt) == 0:
            raise RequestError("prompt must hold at least one token", "prompt")
        if not all(is_int(t) and 0 <= t < cfg.vocab_size for t in prompt):
            raise RequestError(
                f"prompt token ids must be ints in [0, {cfg.vocab_size})", "prompt"
            )
        if len(prompt) >= cfg.max_seq_len:
            raise RequestError(
                f"prompt length {len(prompt)} must be < max_seq_len {cfg.max_seq_len}",
                "prompt",
            )
        total = len(prompt) + params.max_tokens
        if total > cfg.max_seq_len:
            raise RequestError(
                f"prompt length {len(prompt)} + max_tokens {params.max_tokens} = "
                f"{total} > max_seq_len {cfg.max_seq_len}",
                "max_tokens",
            )
        a = s.allocator
        blocks = -(-(total - 1) // a.block_size)  # the last token is never fed back
        if blocks > a.num_blocks:
            raise RequestError(
                f"prompt length {len(prompt)} + max_tokens {params.max_tokens} needs "
                f"{blocks} KV blocks, the pool has {a.num_blocks}",
                "max_tokens",
            )
        if not s.chunked_prefill and len(prompt) > s.max_num_batched_tokens:
            raise RequestError(
                f"prompt length {len(prompt)} > max_num_batched_tokens "
                f"{s.max_num_batched_tokens} and chunked prefill is off",
                "prompt",
            )

    def max_new_tokens(self, prompt_len: int) -> int:
        """The most tokens a prompt of ``prompt_len`` tokens can generate here.

        The end of the context (``max_seq_len``) or of the block pool, whichever
        comes first; 0 when the prompt alone fills it (thread-safe, no change).
        """
        a = self.scheduler.allocator
        room = min(self.model.config.max_seq_len, a.num_blocks * a.block_size + 1)
        return max(0, room - prompt_len)

    def add_request(
        self,
        prompt: Sequence[int],
        params: SamplingParams,
        request_id: str | None = None,
    ) -> SequenceState:
        """Queue a request (checked by :meth:`check_request`); returns its state.

        Raises:
            RequestError: see :meth:`check_request`, or a duplicate ``request_id``.
        """
        self.check_request(prompt, params)
        seq_id, self._next_id = self._next_id, self._next_id + 1
        request_id = str(seq_id) if request_id is None else request_id
        if request_id in self.requests:
            raise RequestError(
                f"request_id {request_id!r} is already queued", "request_id"
            )
        g = torch.Generator(device=self.model.embed.weight.device)
        if params.seed is None:
            g.seed()
        else:
            g.manual_seed(params.seed)
        seq = SequenceState(seq_id, request_id, list(prompt), params, self.clock(), g)
        self.requests[request_id] = seq
        self.scheduler.waiting.append(seq)
        return seq

    def abort(self, request_id: str) -> None:
        """Stop a request (a client went away); unknown ids are ignored."""
        seq = self.requests.pop(request_id, None)
        if seq is not None:
            self.scheduler.finish(seq)
            seq.finish_reason, seq.finish_time = "abort", self.clock()

    def has_unfinished(self) -> bool:
        """Whether any request waits or runs."""
        return bool(self.requests)

    @torch.no_grad()
    def step(self) -> list[StepOutput]:
        """Run one iteration: schedule, run each chunk through the model, sample."""
        s = self.scheduler
        # region step
        batch = s.schedule()  # [(sequence, new tokens)], blocks reserved
        for src, dst in s.copies:  # copy-on-write of shared blocks
            self.runner.copy_block(src, dst)
        s.copies.clear()
        outputs = []
        if batch:
            chunks = [
                Chunk(
                    seq.token_slice(seq.num_computed, seq.num_computed + n),
                    seq.num_computed,
                    s.allocator.block_tables[seq.seq_id],
                )
                for seq, n in batch
            ]
            logits = self.runner.forward(chunks)  # (S, V): one pass for all
            ready = []  # rows whose chunk reached the end: each gets a new token
            for i, (seq, n) in enumerate(batch):
                seq.num_computed += n
                if seq.num_pending == 0:
                    ready.append(i)
            tokens = self._sample([batch[i][0] for i in ready], logits[ready])
            outputs = [
                self._append(batch[i][0], t) for i, t in zip(ready, tokens, strict=True)
            ]
        # endregion
        self.num_steps += 1
        self.batch_tokens.append(sum(n for _, n in batch))
        return outputs

    def _sample(self, seqs: list[SequenceState], logits: torch.Tensor) -> list[int]:
        """A token per row of ``logits`` ``(S, V)``, all greedy rows in one argmax."""
        greedy = [i for i, q in enumerate(seqs) if q.params.temperature == 0]
        tokens = [0] * len(seqs)
        if greedy:
            picked = logits[greedy].argmax(dim=-1).tolist()  # one copy to the host
            for i, t in zip(greedy, picked, strict=True):
                tokens[i] = t
        wide = torch.promote_types(logits.dtype, torch.float32)
        for i, seq in enumerate(seqs):  # sampled rows draw from their own generator
            p = seq.params
            if p.temperature != 0:
                tokens[i] = int(
                    next_token(
                        logits[i : i + 1].to(wide),
                        seq.generator,
                        temperature=p.temperature,
                        top_k=p.top_k,
                        top_p=p.top_p,
                    )[0]
                )
        return tokens

    def _append(self, seq: SequenceState, token: int) -> StepOutput:
        """Add ``token`` to ``seq``; finish it on a stop token or its length."""
        p = seq.params
        seq.output.append(token)
        now = self.clock()
        if seq.first_token_time is None:
            seq.first_token_time = now
        if token in p.stop_token_ids:
            seq.finish_reason = "stop"
        elif len(seq.output) >= p.max_tokens:
            seq.finish_reason = "length"
        if seq.finish_reason is not None:
            seq.finish_time = now
            self.scheduler.finish(seq)
            del self.requests[seq.request_id]
        return StepOutput(seq.request_id, token, seq.finish_reason)

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> list[list[int]]:
        """Serve ``prompts`` together to completion; each one's generated tokens."""
        seqs = [self.add_request(p, params) for p in prompts]
        while self.has_unfinished():
            self.step()
        return [s.output for s in seqs]
