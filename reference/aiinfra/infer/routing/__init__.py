"""Routing requests across engine replicas that each keep a prefix cache.

:mod:`.workload` builds a stream of chat requests that share system prompts and grow
turn by turn; :mod:`.simulate` replays it over ``R`` replicas, each with the paged
allocator's block-granular prefix cache, under three routers (round-robin,
least-loaded, prefix-aware) and counts the prefill tokens each one saves.
"""
