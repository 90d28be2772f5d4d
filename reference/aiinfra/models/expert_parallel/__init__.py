"""Expert parallelism: a mixture-of-experts layer's experts over the ranks of a group.

:mod:`.comm` sends tokens to their experts' ranks and back (all-to-all with uneven
splits, its traffic counted); :mod:`.layer` is the MoE layer holding this rank's
experts; :mod:`.cost` prices the all-to-all on a link; :mod:`.figures` draws the
dispatch, its time and a device mesh from real routings.
"""
