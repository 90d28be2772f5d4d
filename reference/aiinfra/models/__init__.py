"""Model architectures, built from scratch and checked against PyTorch.

One idea per module, in the book's order: :mod:`~aiinfra.models.config` (a flat
config read from a Hugging Face ``config.json``), :mod:`~aiinfra.models.layers`
(RMSNorm, rotary position embedding, SwiGLU), :mod:`~aiinfra.models.attention`
(MHA, MQA and GQA with a KV cache), :mod:`~aiinfra.models.mla` (multi-head latent
attention), :mod:`~aiinfra.models.transformer` (the decoder-only model),
:mod:`~aiinfra.models.flops` (parameter and FLOP counts),
:mod:`~aiinfra.models.kv_cache_size` (KV cache bytes of real models),
:mod:`~aiinfra.models.online_softmax`, :mod:`~aiinfra.models.flash_attention`
(tiled attention in PyTorch), :mod:`~aiinfra.models.flash_triton` and
:mod:`~aiinfra.models.flash_triton_backward` (the Triton kernels),
:mod:`~aiinfra.models.attention_memory` (measured memory) and
:mod:`~aiinfra.models.bench` (``aiinfra bench attention``).
"""
