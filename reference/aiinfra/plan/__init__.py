"""Putting the parallelisms together: the device mesh and the ``aiinfra plan`` planner.

:mod:`.mesh` lays ranks out on a DP x PP x CP x TP grid (TP innermost, inside a
node) and :mod:`.device_mesh` builds the same grid as a ``torch`` ``DeviceMesh``.
The planner reads a job (:mod:`.job`, :mod:`.source`), enumerates its layouts
(:mod:`.search`), sizes their memory with the book's calculator
(:mod:`.stage_memory`) and prices their step time from the cost models
(:mod:`.cost`); :mod:`.report` tabulates the answer, :mod:`.figures` draws it and
:mod:`.cli` is ``aiinfra plan``.
"""
