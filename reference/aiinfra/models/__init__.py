"""Model architectures, built from scratch and checked against PyTorch.

At the root, one idea per module in the book's order: :mod:`.config` (one flat
config for both families of decoders), :mod:`.presets` (released models as data),
:mod:`.layers` (RMSNorm, LayerNorm, rotary embedding, SwiGLU and GELU MLPs),
:mod:`.transformer` (the decoder-only model), :mod:`.params` and :mod:`.flops`
(parameters and training FLOPs), :mod:`.roofline` (arithmetic intensity) and
:mod:`.kv_budget` (how much KV cache fits on GPUs); :mod:`.cli` holds ``aiinfra
bench attention`` and ``aiinfra bench moe``. A folder per larger idea:
:mod:`.attention` (MHA, GQA, MLA, KV cache size), :mod:`.flash` (FlashAttention in
PyTorch and Triton), :mod:`.moe` (mixture of experts), :mod:`.expert_parallel`
(experts over ranks) and :mod:`.hf` (Hugging Face configs and checkpoints).
"""
