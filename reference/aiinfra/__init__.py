"""aiinfra: the tested reference code of the book *AI Infrastructure*.

Every listing, figure and computed number in the book comes from this package.
Subpackages follow the book's chapters: :mod:`aiinfra.comm` (collective
communication), and more as chapters land.
"""

__version__ = "0.1.0"
