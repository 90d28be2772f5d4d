"""Model architectures, built from scratch and checked against PyTorch.

One idea per module, in the book's order: :mod:`~aiinfra.models.config` (one flat
config for both families of decoders) and :mod:`~aiinfra.models.hf_config` (reading
a Hugging Face ``config.json`` into it), :mod:`~aiinfra.models.presets` (released
models as data), :mod:`~aiinfra.models.params` (the parameter counter, by part),
:mod:`~aiinfra.models.layers` (RMSNorm, LayerNorm, rotary position embedding,
SwiGLU and GELU MLPs), :mod:`~aiinfra.models.attention` (MHA, MQA and GQA with a KV
cache), :mod:`~aiinfra.models.mla` (multi-head latent attention),
:mod:`~aiinfra.models.transformer` (the decoder-only model),
:mod:`~aiinfra.models.checkpoint` and :mod:`~aiinfra.models.hf_weights` (loading a
Hugging Face checkpoint, with the RoPE permutation) and
:mod:`~aiinfra.models.checkpoint_check` (the comparison with transformers),
:mod:`~aiinfra.models.flops` (training FLOPs), :mod:`~aiinfra.models.kv_cache_size`
(KV cache bytes of real models), :mod:`~aiinfra.models.online_softmax`,
:mod:`~aiinfra.models.flash_attention` (tiled attention in PyTorch),
:mod:`~aiinfra.models.flash_triton` and :mod:`~aiinfra.models.flash_triton_backward`
(the Triton kernels), :mod:`~aiinfra.models.attention_memory` (measured memory),
:mod:`~aiinfra.models.bench` (the attention benchmark); mixture of experts:
:mod:`~aiinfra.models.moe_spec` (a layer's shape as data),
:mod:`~aiinfra.models.hf_moe_config` (its ``config.json`` fields),
:mod:`~aiinfra.models.moe` (router, top-K, groups, capacity, shared experts),
:mod:`~aiinfra.models.moe_balance` and :mod:`~aiinfra.models.moe_train` (balancing),
:mod:`~aiinfra.models.moe_grouped` and :mod:`~aiinfra.models.moe_bench` (the
sorted-by-expert computation and its timing), :mod:`~aiinfra.models.expert_parallel`,
:mod:`~aiinfra.models.expert_parallel_comm` and
:mod:`~aiinfra.models.expert_parallel_cost` (experts over ranks, all-to-all); and
:mod:`~aiinfra.models.cli` (``aiinfra bench attention``, ``aiinfra bench moe``).
"""
