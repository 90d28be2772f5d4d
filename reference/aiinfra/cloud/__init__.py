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

from aiinfra import lazy

# Imported on first use (aiinfra.lazy): importing the package stays light.
__getattr__, __dir__, __all__ = lazy.exports(
    __name__,
    {
        "aiinfra.cloud.job": ("TrainingJob",),
        "aiinfra.cloud.manifests": (
            "RENDERERS",
            "jobset",
            "plain_job",
            "pytorchjob",
            "to_yaml",
            "volcano_job",
        ),
    },
)
