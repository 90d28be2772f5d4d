"""Every value, table and figure of the models chapter (``docs/models``).

The running examples are Llama 3 8B (GQA) and DeepSeek-V2 (MLA) from the preset
table (:mod:`aiinfra.models.presets`); the attention memory is measured on the CPU
at build time (one head of width 64, fp32).

One module per page: ``docs/models/<page>.rst`` shows the names of
``aiinfra.book.models.<page>`` (its rst names them bare), and another page's as
``aiinfra.book.models.<page>:<name>``. What several pages share lives in
:mod:`._common`.
"""
