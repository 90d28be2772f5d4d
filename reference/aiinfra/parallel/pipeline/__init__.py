"""Pipeline parallelism: the layers in stages, micro-batches flowing through them.

:mod:`.schedules` writes GPipe, 1F1B, interleaved 1F1B and ZB-H1 as data (which
rank runs which pass of which micro-batch); :mod:`.simulator` replays a schedule on
a cost model (its timeline, bubble and memory); :mod:`.executor` runs it on ranks,
a Transformer in stages over point-to-point sends; :mod:`.figures` draws the
schedules from what the simulator computed.
"""
