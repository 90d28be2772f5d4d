"""Kueue: admission that waits for the pods to fit, placement that follows the fabric.

Kueue admits a job on quota: once its ClusterQueue has room for all its pods it
unsuspends the job, and the scheduler places the pods. Two things are left to
chance. The pods may not fit the nodes (quota is a count, not a placement): with
``waitForPodsReady`` (:func:`kueue_configuration`) a job whose pods are not all
ready in time is evicted and requeued, so two half-placed gangs cannot hold each
other's nodes. And the pods may land anywhere in the fabric: with topology-aware
scheduling (TAS, :func:`tas_objects`) the administrator describes the fabric's
levels as node labels (a ``Topology``, referenced by a ``ResourceFlavor``), and a
job's pod template asks, by annotation, for all its pods in one domain of a level
(one rack, one block), which Kueue then finds before it admits the job. Field names
and annotations are those of Kueue v0.19's API (``apis/kueue/v1beta1/
topology_types.go``) and its TAS example (``site/static/examples/tas/``).
"""

from __future__ import annotations

import re
from typing import Any

from aiinfra.cloud.job import TrainingJob, memory_bytes

Object = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
KUEUE_CONFIG = "config.kueue.x-k8s.io/v1beta1"
KUEUE_TIMESTAMPS = ("Eviction", "Creation")
# The pod-template annotations of topology-aware scheduling: all pods of the pod
# set in one domain of the named level, as a requirement or as a preference.
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
#: The fabric's levels, coarsest first, as node labels (Kueue's example names): a
#: block of racks under one spine group, a rack under one leaf switch, a node.
TOPOLOGY_LEVELS = (
    "cloud.provider.com/topology-block",
    "cloud.provider.com/topology-rack",
    "kubernetes.io/hostname",
)
TOPOLOGY = "gpu-fabric"  # the Topology's name
FLAVOR = "gpu-tas"  # the ResourceFlavor that uses it
CLUSTER_QUEUE = "gpu-cluster-queue"


KUEUE_CONFIG = "config.kueue.x-k8s.io/v1beta1"
KUEUE_TIMESTAMPS = ("Eviction", "Creation")


def kueue_configuration(
    timeout: str = "10m",
    block_admission: bool = True,
    timestamp: str = "Eviction",
    backoff_limit_count: int = 5,
) -> Object:
    """Kueue's ``Configuration`` with ``waitForPodsReady``: admission waits for fit.

    Quota admits a job whose pods may still not fit the nodes; with this block a
    job whose pods are not all ready within ``timeout`` is evicted (suspended,
    its quota released) and requeued, and with ``block_admission`` no other job
    is admitted until the admitted one's pods are ready, so two half-placed gangs
    cannot hold each other's nodes. The fields are those of Kueue's "Sequential
    Admission with Ready Pods" task page.

    Args:
        timeout: how long the admitted job's pods have to become ready, a
            duration such as ``"10m"`` (Kueue's default is 5m).
        block_admission: admit nothing else while a job waits for its pods.
        timestamp: where a requeued job goes in the queue: ``Eviction`` (its
            eviction time) or ``Creation`` (its creation time, so it keeps its
            place).
        backoff_limit_count: requeues before the job is deactivated.

    Raises:
        ValueError: a duration, timestamp or count Kueue would reject.
    """
    if not re.fullmatch(r"(\d+(ms|s|m|h))+", timeout) or not re.search(
        r"[1-9]", timeout
    ):
        raise ValueError(
            f"timeout must be a positive duration such as '10m' or '1h30m', got "
            f"{timeout!r}"
        )
    if timestamp not in KUEUE_TIMESTAMPS:
        raise ValueError(
            f"timestamp must be one of {', '.join(KUEUE_TIMESTAMPS)}, got {timestamp!r}"
        )
    if isinstance(backoff_limit_count, bool) or not isinstance(
        backoff_limit_count, int
    ):
        raise TypeError(
            f"backoff_limit_count must be an int, got {backoff_limit_count!r}"
        )
    if backoff_limit_count < 0:
        raise ValueError(f"backoff_limit_count must be >= 0, got {backoff_limit_count}")
    return {
        "apiVersion": KUEUE_CONFIG,
        "kind": "Configuration",
        "waitForPodsReady": {
            "enable": True,
            "timeout": timeout,
            "blockAdmission": block_admission,
            "requeuingStrategy": {
                "timestamp": timestamp,
                "backoffLimitCount": backoff_limit_count,
            },
        },
    }


def topology_annotations(job: TrainingJob) -> dict[str, str]:
    """The annotations of the job's pod template that ask Kueue for one domain."""
    if job.topology_level is None:
        return {}
    key = REQUIRED_TOPOLOGY if job.topology_required else PREFERRED_TOPOLOGY
    return {key: job.topology_level}


def _quantity(count: int, per_pod: str) -> str:
    """``count`` pods' worth of a CPU or memory quantity (``"16"``, ``"128Gi"``)."""
    m = re.fullmatch(r"(\d+)(m|Ki|Mi|Gi|Ti)?", per_pod)
    if m is None:  # a fractional CPU, "0.5": Kueue takes a decimal quantity
        return f"{float(per_pod) * count:g}"
    return f"{int(m[1]) * count}{m[2] or ''}"


def tas_objects(
    job: TrainingJob, quota_nodes: int, levels: tuple[str, ...] = TOPOLOGY_LEVELS
) -> list[Object]:
    """The administrator's side of TAS for ``job``'s queue: the fabric and the quota.

    A ``Topology`` lists the levels; a ``ResourceFlavor`` names it in
    ``topologyName`` (and tolerates the GPU taint, which TAS must know to count a
    node); a ``ClusterQueue`` gives that flavor a quota of ``quota_nodes`` pods of
    the job's size; a ``LocalQueue`` in the job's namespace points at it.

    Args:
        job: a queued job (``job.queue`` set) whose ``topology_level`` is one of
            ``levels``, or ``None``.
        quota_nodes: pods of the job's size the queue may run at once, >= the
            job's ``max_nodes``.
        levels: the node labels of the levels, coarsest first; the last is
            usually ``kubernetes.io/hostname``.

    Raises:
        ValueError: no queue, a level the topology lacks, or a quota the job
            cannot fit in.
    """
    if job.queue is None:
        raise ValueError("job.queue must be set: TAS places only jobs Kueue admits")
    if not levels or len(set(levels)) != len(levels):
        raise ValueError(f"levels must be distinct node labels, got {levels!r}")
    if job.topology_level is not None and job.topology_level not in levels:
        raise ValueError(
            f"job.topology_level must be one of the topology's levels {levels}, got "
            f"{job.topology_level!r}"
        )
    if quota_nodes < job.max_nodes:
        raise ValueError(
            f"quota_nodes must be >= the job's max_nodes ({job.max_nodes}), got "
            f"{quota_nodes}: Kueue would never admit it"
        )
    memory_bytes(job.memory, "memory")  # a binary quantity, checked by the job too
    quota = {
        "cpu": _quantity(quota_nodes, job.cpu),
        "memory": _quantity(quota_nodes, job.memory),
        job.gpu_resource: quota_nodes * job.gpus_per_node,
    }
    taint = {"key": job.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}
    return [
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {"topologyName": TOPOLOGY, "tolerations": [taint]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": list(quota),
                        "flavors": [
                            {
                                "name": FLAVOR,
                                "resources": [
                                    {"name": k, "nominalQuota": v}
                                    for k, v in quota.items()
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": job.queue, "namespace": job.namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        },
    ]
