"""The engine against transformers on one checkpoint (``bench engine --against``).

``aiinfra bench engine --against transformers`` builds a random-weight Llama
checkpoint (a ``transformers`` ``LlamaForCausalLM`` saved with a byte tokenizer: token
``i`` is byte ``i``, as the server's tokenizer), loads it into both, and runs the same
prompts through:

- three offline paths: the engine (:class:`~aiinfra.infer.engine.core.Engine`),
  transformers' continuous batching (``generate_batch``'s manager, given the same
  KV pool, block size and token budget as the engine) and transformers' padded
  ``generate`` (left-padded batches, each run to its longest request);
- two servers, each in its own process: ``aiinfra serve`` and, where the installed
  transformers has it and its server's packages (FastAPI, uvicorn) are there,
  ``transformers serve --continuous-batching``; a load of streamed completions at a
  fixed number of concurrent clients, timed from the client (TTFT, time per token).

Two regimes: *equal* output lengths (every request generates ``output_len`` tokens,
no EOS), at each batch size, and *varying* lengths (drawn uniformly from
``vary_min .. vary_max``) with more requests than batch slots, which is what
continuous batching is for: a static batch runs until its longest request ends, the
engine refills a slot as soon as one frees. Greedy decoding: every path must give
every request the same tokens, which the result records. Timing: one intra-op thread,
the systems alternated within each repeat, the best of ``repeats`` (this is a
shared machine: its load average is recorded with every run). A profile of the
engine's decode step at the largest batch says where the time goes.

The files, in the order of a run: :mod:`.config` (the sizes, the checkpoint, the
prompts), :mod:`.offline` (the three offline paths, timed), :mod:`.profile` (the
engine's decode step, part by part), :mod:`.servers` (both servers under one load),
:mod:`.run` (all of it, one results body) and :mod:`.tables` (what the terminal and
the book show).
"""
