"""What the book's pages show: one module per page, every value by name.

A page never computes: each ``:calc:``, ``aiinfra-table`` and ``aiinfra-figure`` of
``docs/<chapter>/<page>.rst`` calls a name defined in its own module,
``aiinfra.book.<chapter>.<page>`` (written bare), or, for a value of another page, in
that page's module (written ``aiinfra.book.<chapter>.<other>:<name>``); a build test
checks it. So the prose names a quantity and one module says, in one place, how it
is computed, with which model, sizes and link. Thresholds that prose and tests share
(such as the DDP bar) are constants of the package that both read.
"""
