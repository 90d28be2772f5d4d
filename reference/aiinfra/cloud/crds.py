"""The schemas the manifests are checked against, pinned: where each comes from.

Built-in objects (Service, Job) are checked against the OpenAPI schema of Kubernetes
:data:`KUBERNETES_VERSION` (the ``kubernetes-validate`` package ships it); the custom
resources against the ``openAPIV3Schema`` of their published CRDs, copied unchanged
into ``crds/`` with a ``$comment`` naming the repository, path and tag.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

KUBERNETES_VERSION = "1.33.0"  # the cluster version the built-in objects must fit
# Pods that claim devices through DRA are also checked against the release in which
# its API, resource.k8s.io/v1, became generally available.
DRA_KUBERNETES_VERSION = "1.34.0"

#: ``apiVersion/kind`` of each custom resource -> its schema file in ``crds/``.
CRDS = {
    "jobset.x-k8s.io/v1alpha2/JobSet": "jobset-v1alpha2.json",
    "kubeflow.org/v1/PyTorchJob": "pytorchjob-v1.json",
    "scheduling.volcano.sh/v1beta1/PodGroup": "podgroup-v1beta1.json",
    "batch.volcano.sh/v1alpha1/Job": "vcjob-v1alpha1.json",
    "monitoring.coreos.com/v1/PodMonitor": "podmonitor-v1.json",
    "monitoring.coreos.com/v1/ServiceMonitor": "servicemonitor-v1.json",
    "kueue.x-k8s.io/v1beta2/Topology": "topology-v1beta2.json",
    "kueue.x-k8s.io/v1beta2/ResourceFlavor": "resourceflavor-v1beta2.json",
    "kueue.x-k8s.io/v1beta2/ClusterQueue": "clusterqueue-v1beta2.json",
    "kueue.x-k8s.io/v1beta2/LocalQueue": "localqueue-v1beta2.json",
    "trainer.kubeflow.org/v1alpha1/TrainJob": "trainjob-v1alpha1.json",
    "resource.nvidia.com/v1beta1/ComputeDomain": "computedomain-v1beta1.json",
}


@cache
def crd_schema(key: str) -> dict:
    """The ``openAPIV3Schema`` of custom resource ``key`` (``apiVersion/kind``).

    Raises:
        ValueError: ``key`` is not one of :data:`CRDS`.
    """
    if key not in CRDS:
        raise ValueError(f"key must be one of {sorted(CRDS)}, got {key!r}")
    text = resources.files("aiinfra.cloud").joinpath("crds", CRDS[key]).read_text()
    return json.loads(text)


def crd_source(key: str) -> str:
    """Where the schema of ``key`` was copied from: repository, path, tag, commit."""
    return crd_schema(key)["$comment"]
