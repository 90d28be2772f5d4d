"""Every value, table and figure of the overview chapter (``docs/overview``).

One module per page: ``docs/overview/<page>.rst`` shows the names of
``aiinfra.book.overview.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.overview.<page>:<name>``.
"""
