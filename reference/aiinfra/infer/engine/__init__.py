"""An inference engine and the OpenAI-compatible server in front of it.

:mod:`.scheduler` picks each iteration's decodes and prompt chunks within the token
budget and the free KV blocks; :mod:`.layout` says where each packed token reads and
writes, and :mod:`.model_runner` runs the whole iteration as one forward pass over a
paged KV cache; :mod:`.core` is the engine (continuous batching, chunked prefill,
preemption). :mod:`.loop` owns the engine in a thread, :mod:`.server` serves it over
HTTP, a :mod:`.handler` per connection, and :mod:`.server_api` checks the request
and response bodies; :mod:`.load` is a client that loads a server with streamed
requests. :mod:`.bench` times the engine (``aiinfra bench engine``) and
:mod:`.compare` times it against transformers on one checkpoint (``aiinfra bench
engine --against transformers``).
"""
