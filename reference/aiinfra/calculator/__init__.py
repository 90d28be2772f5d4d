"""The book's calculators: the ``aiinfra`` command's own code behind a form.

A calculator in the page (``aiinfra-calculator`` in the book) runs in the reader's
browser under Pyodide, with this package as a pure-Python wheel: the form is made
from the command's own flags (:mod:`aiinfra.calculator.forms`), and the answer is
what ``aiinfra <command> --json`` prints for the same flags, so the page and the
terminal cannot disagree. Nothing here imports torch or matplotlib.
"""
