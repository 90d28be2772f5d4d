"""Putting the parallelisms together: the device mesh and the ``aiinfra plan`` planner.

:mod:`~aiinfra.plan.mesh` lays ranks out on a DP x PP x CP x TP grid (TP innermost,
inside a node) and :mod:`~aiinfra.plan.device_mesh` builds the same grid as a
``torch`` ``DeviceMesh``. The planner enumerates the layouts of a job
(:mod:`~aiinfra.plan.search`), sizes their memory with the book's calculator
(:mod:`~aiinfra.plan.stage_memory`) and prices their step time from the cost models
(:mod:`~aiinfra.plan.cost`); :mod:`~aiinfra.plan.report` tabulates the answer.
"""
