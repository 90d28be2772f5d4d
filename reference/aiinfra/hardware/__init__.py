"""Hardware: the accelerators' datasheets, cluster networks and their failures.

:mod:`.specs` holds the one table of GPU numbers (:data:`GPUS`), which the roofline,
the KV budget and the cost models read; :mod:`.topology` sizes cluster networks (the
fat-tree of Al-Fares et al., a leaf-spine with oversubscription) and :mod:`.rails` a
rail-optimised GPU cluster built from them; :mod:`.reliability` turns failure rates
into checkpoint intervals and goodput (Young 1974, Daly 2006) and reads the
interruptions Llama 3 reported.
"""

from aiinfra.hardware.specs import GPUS, Gpu

__all__ = ["GPUS", "Gpu"]
