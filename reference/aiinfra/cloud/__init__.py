"""Cloud native: a training job on Kubernetes, its image and its monitoring.

:mod:`.job` describes a multi-node ``torchrun`` job once (:class:`TrainingJob`,
checked before anything is rendered); :mod:`.manifests` renders it as a plain Indexed
Job with a headless Service, a JobSet, a Kubeflow PyTorchJob or a Volcano Job, with
Kueue's gang admission when a queue is named (``aiinfra k8s render``). The
monitoring modules need the ``cloud`` extra and are imported by name:
:mod:`.metrics` (the training exporter and the DCGM fields that matter),
:mod:`.alerts` (Prometheus rules for the hardware chapter's failures) and
:mod:`.dashboard` (a Grafana dashboard from the same metric list).
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
