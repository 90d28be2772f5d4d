"""Every value, table and figure of the inference chapter (``docs/inference``).

One module per page: ``docs/inference/<page>.rst`` shows the names of
``aiinfra.book.inference.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.inference.<page>:<name>``.
"""
