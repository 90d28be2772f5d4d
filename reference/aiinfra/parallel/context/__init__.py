"""Context parallelism: one sequence sharded across the ranks, attention exact.

:mod:`.zigzag` says where each position of a sharded sequence lives (contiguous and
zig-zag layouts, the latter balancing causal work); :mod:`.ring_attention` passes
K and V around a ring and merges the partial softmaxes; :mod:`.ulysses` trades the
sequence shard for a head shard with all-to-alls (DeepSpeed-Ulysses). :mod:`.cost`
prices bytes, overlap and balance, and :mod:`.figures` draws them.
"""
