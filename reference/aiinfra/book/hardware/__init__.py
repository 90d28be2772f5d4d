"""Every value, table and figure of the hardware chapter (``docs/hardware``).

One module per page: ``docs/hardware/<page>.rst`` shows the names of
``aiinfra.book.hardware.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.hardware.<page>:<name>``.
"""
