"""Serving a model fast: the inference chapter's code.

At the root, what every part of serving reads: :mod:`.metrics` (TTFT, TPOT,
throughput, goodput), :mod:`.trace` (request traces and what a server made of
them), :mod:`.step_cost` (a roofline model of one serving step), :mod:`.phase_bench`
(prefill and decode on a GPU's roofline) and :mod:`.sampling` (temperature, top-k,
top-p, min-p, repetition penalty, each equal to transformers' own); :mod:`.cli`,
:mod:`.bench_cli` and :mod:`.serve_cli` are the chapter's commands. A folder per
idea, in the chapter's order: :mod:`.kv` (the KV cache), :mod:`.paged` (paged
attention), :mod:`.batching` (continuous batching, disaggregation), :mod:`.engine`
(the engine and its server), :mod:`.quant` (quantization), :mod:`.distill`
(distillation) and :mod:`.speculative` (speculative decoding).
"""
