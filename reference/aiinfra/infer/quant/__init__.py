"""Quantization: weights (and the KV cache) in fewer bits, and what it costs.

:mod:`.rtn` rounds to nearest (absmax and zero-point, int8 and int4, per tensor,
channel or group) and holds a weight-only linear layer; :mod:`.outliers` is
LLM.int8; :mod:`.gptq`, :mod:`.awq` and :mod:`.smoothquant` are the calibrated
methods; :mod:`.kv` quantizes the KV cache; :mod:`.triton_matmul` is a weight-only
quantized matmul kernel; :mod:`.evaluate` measures perplexity under each method
(``aiinfra quantize``).
"""
