"""Every value, table and figure of the cloud native chapter (``docs/cloud``).

One module per page: ``docs/cloud/<page>.rst`` shows the names of
``aiinfra.book.cloud.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.cloud.<page>:<name>``.
"""
