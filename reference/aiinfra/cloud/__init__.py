"""Cloud native: a training job on Kubernetes, its image and its monitoring.

:mod:`.container` reads a container's namespaces and cgroups and measures the
training image; :mod:`.job` describes a multi-node ``torchrun`` job once
(:class:`TrainingJob`) and :mod:`.manifests` renders it as an Indexed Job, a JobSet,
a Kubeflow PyTorchJob or a Volcano Job, checked against the controllers' schemas in
``crds/`` (:mod:`.crds`); :mod:`.gang` simulates gang scheduling; :mod:`.train` and
:mod:`.restart_bench` kill a worker and measure the restart. The monitoring modules
need the ``cloud`` extra and are imported by name: :mod:`.metrics` (the training
exporter and the DCGM fields), :mod:`.alerts` (Prometheus rules) and
:mod:`.dashboard` (a Grafana dashboard); :mod:`.cli` holds ``aiinfra k8s``.
"""

from .job import TrainingJob
from .manifests import RENDERERS, jobset, plain_job, pytorchjob, to_yaml, volcano_job

__all__ = [
    "RENDERERS",
    "TrainingJob",
    "jobset",
    "plain_job",
    "pytorchjob",
    "to_yaml",
    "volcano_job",
]
