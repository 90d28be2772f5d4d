"""aiinfra: the tested reference code of the book *AI Infrastructure*.

Every listing, figure and computed number in the book comes from this package.
Subpackages follow the book's chapters: :mod:`aiinfra.comm` (collective
communication), :mod:`aiinfra.memory`, :mod:`aiinfra.precision` and
:mod:`aiinfra.parallel` (training), :mod:`aiinfra.plan` (the parallel-layout
planner), :mod:`aiinfra.models` (model architectures, mixture of experts) and
:mod:`aiinfra.scaling` (scaling laws and their fit), :mod:`aiinfra.infer` (serving:
sampling, speculative decoding, quantization, the paged KV cache).
:mod:`aiinfra.book` names every value the pages show, one module per chapter;
:mod:`aiinfra.results` stores measurements; :mod:`aiinfra.cli` is the ``aiinfra``
command, made of each chapter's ``cli.py``.
"""

__version__ = "0.1.0"
