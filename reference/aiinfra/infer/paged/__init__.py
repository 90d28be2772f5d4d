"""Paged attention: the KV cache in fixed-size blocks, read through block tables.

:mod:`.block_allocator` hands out blocks, keeps each sequence's block table, shares
blocks copy-on-write and caches prefixes; :mod:`.attention` is decode attention
through block tables and :mod:`.attention_triton` the same as a Triton kernel;
:mod:`.waste` compares reserved with used KV memory; :mod:`.figures` draws the
allocator's runs.
"""
