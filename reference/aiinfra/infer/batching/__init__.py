"""Batching on a serving GPU: static, continuous, chunked, and disaggregated.

:mod:`.simulator` replays a request trace iteration by iteration on the step cost
model (:mod:`aiinfra.infer.step_cost`), for static and continuous batching and
chunked prefill; :mod:`.disagg` gives prefill and decode their own GPUs and sends
the KV cache between them.
"""
