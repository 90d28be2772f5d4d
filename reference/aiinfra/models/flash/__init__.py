"""FlashAttention: exact attention in tiles, memory linear in the sequence.

:mod:`.online_softmax` is the one-pass normalizer the tiles rest on;
:mod:`.attention` the tiled forward and backward in plain PyTorch (and the standard
algorithm they are checked against); :mod:`.triton_forward` and
:mod:`.triton_backward` the same as Triton kernels; :mod:`.split_kv` Flash-Decoding
over a long cache. :mod:`.memory` measures the memory of each algorithm,
:mod:`.kernel_matmuls` counts the kernels' matrix products, :mod:`.bench` times them
(``aiinfra bench attention``) and :mod:`.steps` draws the softmax and the tiles step
by step.
"""
