"""aiinfra: the tested reference code of the book *AI Infrastructure*.

Every listing, figure and computed number in the book comes from this package. The
ground floor, which imports no chapter package and which every package may read, is
the package root: :mod:`aiinfra.accelerators` (the datasheets), :mod:`aiinfra.report`
(tables), :mod:`aiinfra.results` (stamped measurements), :mod:`aiinfra.distributed`
(spawned ranks), :mod:`aiinfra.clikit`, :mod:`aiinfra.timing` and
:mod:`aiinfra.triton_support`. Above it, one subpackage per idea of the book:
:mod:`aiinfra.hardware`, :mod:`aiinfra.comm` (collectives), :mod:`aiinfra.cloud`,
:mod:`aiinfra.memory`, :mod:`aiinfra.precision`, :mod:`aiinfra.parallel` (with its
folders data, zero, tensor, pipeline, context), :mod:`aiinfra.plan`,
:mod:`aiinfra.storage`, :mod:`aiinfra.models` (attention, flash, moe,
expert_parallel, hf), :mod:`aiinfra.scaling` and :mod:`aiinfra.infer` (kv, paged,
batching, engine, quant, distill, speculative). :mod:`aiinfra.book` holds one module
per page of the book, on top; :mod:`aiinfra.cli` is the ``aiinfra`` command, made of
each subpackage's ``cli.py``.
"""

__version__ = "0.1.0"
