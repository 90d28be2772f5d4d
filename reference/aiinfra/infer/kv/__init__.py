"""The KV cache: decoding with and without it, and what one decode step reads.

:mod:`.decode` decodes with and without a cache and counts a decode step's bytes and
FLOPs; :mod:`.decode_bench` times both, token by token (``aiinfra bench decode``).
"""
