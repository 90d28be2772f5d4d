"""Knowledge distillation: a small student learns a teacher's distribution.

:mod:`.loss` holds the softened targets and the distillation loss; :mod:`.train`
trains a teacher and a student with and without it, measured (``aiinfra distill``).
"""
