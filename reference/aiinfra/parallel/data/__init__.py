"""Data parallelism: one replica per rank, gradients summed over the ranks.

:mod:`.naive` all-reduces every gradient after backward; :mod:`.bucketed` sends
buckets during backward (PyTorch DDP's design) and accumulates without
communication; :mod:`.token_loss` weighs a per-token loss over ranks and
micro-batches. :mod:`.overlap` bounds when the all-reduce hides behind backward,
:mod:`.timeline` simulates a step bucket by bucket (:mod:`.timeline_figures` draws
it), :mod:`.figures` draws DDP's buckets step by step, and :mod:`.bench` times ours
against PyTorch's ``DistributedDataParallel``.
"""
