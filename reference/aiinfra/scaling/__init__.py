"""Scaling laws: Kaplan's and Chinchilla's laws, their optimum, and a fitter.

:mod:`.laws` holds the laws and the published parameters, :mod:`.fit` fits the
Chinchilla form to training runs (with :mod:`.lbfgs`), :mod:`.data` loads the runs
read off Hoffmann et al.'s Figure 4 (the files in ``data/``), :mod:`.stamp` keeps
the committed fit, :mod:`.report` and :mod:`.figures` show the laws and the fit, and
:mod:`.cli` is ``aiinfra scaling``.
"""
