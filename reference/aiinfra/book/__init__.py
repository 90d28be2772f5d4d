"""What the book's pages show: one module per chapter, every value by name.

A page never computes: each ``:calc:``, ``aiinfra-table`` and ``aiinfra-figure`` of
``docs/<chapter>/`` calls a name defined in ``aiinfra.book.<chapter>`` (a build test
checks it), so the prose names a quantity and the module says, in one place, how it
is computed, with which model, sizes and link. Thresholds that prose and tests share
(such as the DDP bar) are constants of the package that both read.
"""
