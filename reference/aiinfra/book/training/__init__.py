"""Every value, table and figure of the training chapter (``docs/training``).

The running example is Llama 3 8B (its preset, :mod:`aiinfra.models.presets`) and
ZeRO's own example, 7.5 billion parameters on 64 ranks (Rajbhandari et al. 2020,
Fig. 1). Measured DDP and ZeRO numbers read the ``ddp`` and ``zero`` results
(:mod:`aiinfra.results`); the ZeRO memory table reads the bytes that
``aiinfra bench zero`` measured on four gloo ranks.

One module per page: ``docs/training/<page>.rst`` shows the names of
``aiinfra.book.training.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.training.<page>:<name>``.
"""
