"""Attention variants: what a query reads, and what the KV cache keeps.

:mod:`.gqa` holds multi-head, multi-query and grouped-query attention as one module
with a KV cache; :mod:`.mla` DeepSeek's multi-head latent attention and its absorbed
decode path; :mod:`.kv_cache_size` the cache's bytes per token of real models, by
formula and by filling caches; :mod:`.flops` the FLOPs of attention, full, causal
and windowed.
"""
