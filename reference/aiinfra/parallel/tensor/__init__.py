"""Tensor parallelism: each layer's matrices split across the ranks (Megatron-LM).

:mod:`.ops` holds Megatron's conjugate operators ``f`` and ``g`` and their
sequence-parallel counterparts; :mod:`.layers` the column- and row-parallel linear
layers and the tensor-parallel SwiGLU; :mod:`.attention` attention split by heads;
:mod:`.vocab` the vocabulary-parallel embedding and cross-entropy. :mod:`.model`
writes a plan as data and applies it to the package's Transformer, :mod:`.dtensor`
applies the same plan with PyTorch's own ``parallelize_module``. :mod:`.cost` prices
a layer's traffic, :mod:`.steps` runs the MLP rank by rank in one process and
:mod:`.figures` draws the plan, the heads, the memory and the cost.
"""
