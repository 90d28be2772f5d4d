"""ZeRO: data parallelism whose model states are sharded over the ranks.

:mod:`.flat` lays a module's parameters out as flat units padded to whole shards;
:mod:`.stage1`, :mod:`.stage2` and :mod:`.stage3` shard the optimizer states, then
the gradients, then the parameters, each stage a subclass of the one before;
:mod:`.optim` clips and decays on shards. :mod:`.memory` measures bytes and traffic
against the paper's formulas, :mod:`.compare` trains against DeepSpeed and FSDP2,
:mod:`.results` holds the committed comparison, :mod:`.timeline` puts ZeRO-3's
prefetching on a cost model and :mod:`.figures` draws the stages.
"""
