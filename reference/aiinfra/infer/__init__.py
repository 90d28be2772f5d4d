"""Serving a model fast: sampling, speculative decoding, quantization, paged KV cache.

The inference chapter's code, first part: :mod:`~aiinfra.infer.sampling` (temperature,
top-k, top-p, min-p, repetition penalty, each equal to transformers' own),
:mod:`~aiinfra.infer.speculative` (the exact acceptance rule and a draft-and-verify
loop), :mod:`~aiinfra.infer.quant` (round-to-nearest int8/int4, per tensor, channel or
group, and a weight-only linear layer) with :mod:`~aiinfra.infer.quant_outliers`
(LLM.int8), :mod:`~aiinfra.infer.block_allocator` (KV blocks, block tables,
copy-on-write and prefix caching), :mod:`~aiinfra.infer.paged_attention` (decode
attention through block tables) and :mod:`~aiinfra.infer.paged_waste` (reserved
against used KV memory).
"""
