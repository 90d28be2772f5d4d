"""Every value, table and figure of the communication chapter (``docs/communication``).

One module per page: ``docs/communication/<page>.rst`` shows the names of
``aiinfra.book.communication.<page>`` (its rst names them bare), and another
page's as ``aiinfra.book.communication.<page>:<name>``. What several pages share
lives in :mod:`._common` (units) and :mod:`._cluster` (the cluster of the
checkpoint and data-loading pages).
"""
