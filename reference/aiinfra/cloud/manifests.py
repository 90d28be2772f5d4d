"""Kubernetes manifests of a torchrun job: an Indexed Job, a JobSet, a PyTorchJob.

Every controller gets the same pod: one per node (anti-affinity on the node's
hostname), all G of its GPUs as a resource limit, ``/dev/shm`` in memory, and
``torchrun`` with the rendezvous at pod 0 (:meth:`TrainingJob.torchrun_args`). They
differ in who names pod 0 and who restarts the group: a plain Indexed Job needs a
headless Service to give pod 0 a DNS name; a JobSet makes that Service itself and
restarts all its Jobs together; the Kubeflow training operator's PyTorchJob adds
elastic scaling. With ``queue`` set, Kueue admits the whole job or none of it (the
object is created suspended and labelled with its LocalQueue); without Kueue, the
Volcano variant gangs the pods with a PodGroup. Each function returns plain dicts in
the order ``kubectl apply`` needs them; a job whose pods serve metrics gets its
PodMonitor last (:mod:`aiinfra.cloud.scrape`).

Two newer ways to run the same pods are rendered beside them: Kubeflow Trainer v2's
``TrainJob``, which names a ``ClusterTrainingRuntime`` (the pod's shape) and supplies
only the trainer's image, command and sizes (:func:`trainjob`); and, for a
multi-node NVLink rack, a ``ComputeDomain`` of NVIDIA's DRA driver whose IMEX channel
each pod claims through Dynamic Resource Allocation (:func:`compute_domain`):
``aiinfra k8s render --kind trainjob`` and ``--compute-domain NAME``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from aiinfra.clikit import require
from aiinfra.cloud.job import (
    CKPT_MOUNT,
    METRICS_PORT_ENV,
    POD_LABEL,
    REPLICATED_JOB,
    RESTART_ENV,
    TrainingJob,
)
from aiinfra.cloud.kueue import topology_annotations
from aiinfra.cloud.scrape import METRICS_PORT_NAME, pod_monitor

Object = dict[str, Any]
CONTAINER = "pytorch"  # the training operator finds its container by this name
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"  # pod annotation naming its PodGroup
# Multus attaches the NetworkAttachmentDefinitions this pod annotation names, as
# net1, net2, ... beside the pod network's eth0.
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"
# What NCCL needs to use the RDMA NICs the pod holds (NCCL's environment variables).
RDMA_ENV = {
    "NCCL_NET": "IB",  # verbs or fail: no silent fallback to sockets
    "NCCL_IB_HCA": "mlx5",  # a prefix: every mlx5_* HCA the device plugin mounted
    "NCCL_SOCKET_IFNAME": "eth0",  # bootstrap over the pod network, data over verbs
}
# NVIDIA's DRA driver (k8s-dra-driver-gpu v25.12.0): a ComputeDomain makes a
# ResourceClaimTemplate of the name it is given; a claim from it is one IMEX channel
# (/dev/nvidia-caps-imex-channels/channelN) of the IMEX domain its pods' nodes join.
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
IMEX_CLAIM = "imex-channel"  # the pod's name for its claim, listed by the container
# Kubeflow Trainer v2 (kubeflow/trainer v2.3.0): the TrainJob's runtime and the names
# its torch-distributed ClusterTrainingRuntime gives the trainer's replicated job
# and container (manifests/base/runtimes/torch_distributed.yaml; constants.Node).
TRAINER_API = "trainer.kubeflow.org/v1alpha1"
TRAINER_RUNTIME = "torch-distributed"
TRAINER_NODE = "node"
TRAINER_PATCH_MANAGER = "aiinfra.dev/render"  # who owns the TrainJob's patch


def metadata(job: TrainingJob, queued: bool = False) -> Object:
    """Name, namespace and labels; the Kueue queue label on the queued object."""
    labels = {POD_LABEL: job.name}
    if queued and job.queue is not None:
        labels[QUEUE_LABEL] = job.queue
    return {"name": job.name, "namespace": job.namespace, "labels": labels}


def pod_template(job: TrainingJob, kind: str, restart_policy: str) -> Object:
    """The pod every node runs: torchrun over all of its GPUs.

    Args:
        job: the job.
        kind: the controller, which names the rendezvous host.
        restart_policy: ``Never`` where a controller replaces failed pods.

    Returns:
        A ``PodTemplateSpec``.
    """
    container = {
        "name": CONTAINER,
        "image": job.image,
        "command": ["torchrun"],
        "args": list(job.torchrun_args(kind)),
        "ports": [{"name": "rdzv", "containerPort": job.rdzv_port}],
        # Restarted workers must not reuse the agent's store, which still holds the
        # last attempt's addresses (pytorch/pytorch#135712): see aiinfra.cloud.train.
        "env": [{"name": RESTART_ENV, "value": "1"}],
        "resources": {
            "requests": {"cpu": job.cpu, "memory": job.memory},
            # Extended resources are limits only; the request defaults to them.
            "limits": {job.gpu_resource: job.gpus_per_node, "memory": job.memory},
        },
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    # No two pods of this job on one node: torchrun runs one agent per node.
    one_per_node = {
        "labelSelector": {"matchLabels": {POD_LABEL: job.name}},
        "topologyKey": "kubernetes.io/hostname",
    }
    metadata: Object = {"labels": {POD_LABEL: job.name}}
    if job.rdma:
        # The RDMA NICs: the device plugin's resource mounts /dev/infiniband,
        # IPC_LOCK lets NCCL pin (register) memory for the NIC, Multus adds the
        # secondary interface, and NCCL is told to use verbs on the mlx5 HCAs.
        container["resources"]["limits"][job.rdma_resource] = 1
        container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
        container["env"] += [{"name": k, "value": v} for k, v in RDMA_ENV.items()]
        metadata["annotations"] = {MULTUS_NETWORKS: job.rdma_network}
    if job.topology_level is not None:
        # Kueue reads the pod set's topology request from its pod template.
        metadata.setdefault("annotations", {}).update(topology_annotations(job))
    shm = {"medium": "Memory", "sizeLimit": job.shm_size}
    volumes: list[Object] = [{"name": "dshm", "emptyDir": shm}]
    if job.metrics_port is not None:
        # The entry point serves /metrics here; the job's PodMonitor names the port.
        port = {"name": METRICS_PORT_NAME, "containerPort": job.metrics_port}
        container["ports"].append(port)
        container["env"].append(
            {"name": METRICS_PORT_ENV, "value": str(job.metrics_port)}
        )
    if job.compute_domain is not None:
        # Dynamic Resource Allocation: the pod claims one IMEX channel from the
        # ComputeDomain's template; the container lists the claims it uses.
        container["resources"]["claims"] = [{"name": IMEX_CLAIM}]
        spec_claims = [
            {"name": IMEX_CLAIM, "resourceClaimTemplateName": job.compute_domain}
        ]
    if job.ckpt_claim is not None:
        # One shared volume: every rank's shard in one place, read by any restart.
        container["volumeMounts"].append({"name": "ckpt", "mountPath": CKPT_MOUNT})
        claim = {"claimName": job.ckpt_claim}
        volumes.append({"name": "ckpt", "persistentVolumeClaim": claim})
    spec = {
        "restartPolicy": restart_policy,
        "containers": [container],
        "volumes": volumes,
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [one_per_node]
            }
        },
        # GPU nodes are commonly tainted so that only pods asking for GPUs land there.
        "tolerations": [
            {"key": job.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}
        ],
    }
    if job.compute_domain is not None:
        spec["resourceClaims"] = spec_claims
    return {"metadata": metadata, "spec": spec}


def indexed_job_spec(job: TrainingJob, kind: str, backoff_limit: int) -> Object:
    """A ``JobSpec`` of N pods indexed 0..N-1, all running at once."""
    return {
        "completionMode": "Indexed",
        "completions": job.nodes,
        "parallelism": job.nodes,
        "backoffLimit": backoff_limit,
        "template": pod_template(job, kind, "Never"),
    }


def headless_service(job: TrainingJob) -> Object:
    """The Service that gives pod ``i`` the DNS name ``<job>-<i>.<job>``."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(job),
        "spec": {
            "clusterIP": "None",
            "selector": {POD_LABEL: job.name},
            # DNS records before the pods are Ready: the rendezvous runs before.
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rdzv", "port": job.rdzv_port}],
        },
    }


def plain_job(job: TrainingJob, kind: str = "job") -> list[Object]:
    """A headless Service and a ``batch/v1`` Indexed Job of N pods.

    A failed pod is replaced under the same index and hostname, up to
    ``max_restarts`` times (``backoffLimit``); torchrun restarts the group.

    Args:
        job: the job.
        kind: the controller named in the rendezvous host, ``job`` or ``volcano``.

    Returns:
        ``[Service, Job]``.
    """
    spec = indexed_job_spec(job, kind, job.max_restarts)
    spec["template"]["spec"]["subdomain"] = job.name  # the Service's name
    if job.queue is not None:
        spec["suspend"] = True  # Kueue unsuspends it once the quota admits all pods
    return [
        headless_service(job),
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata(job, queued=True),
            "spec": spec,
        },
    ]


def jobset(job: TrainingJob) -> list[Object]:
    """A ``jobset.x-k8s.io/v1alpha2`` JobSet: one replicated Indexed Job.

    The JobSet makes the headless Service itself and, when any pod fails, recreates
    all its Jobs, up to ``max_restarts`` times; so each Job retries nothing.
    """
    spec: Object = {
        "network": {"enableDNSHostnames": True},
        "failurePolicy": {"maxRestarts": job.max_restarts},
        "replicatedJobs": [
            {
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {"spec": indexed_job_spec(job, "jobset", 0)},
            }
        ],
    }
    if job.queue is not None:
        spec["suspend"] = True
    return [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": metadata(job, queued=True),
            "spec": spec,
        }
    ]


def pytorchjob(job: TrainingJob) -> list[Object]:
    """A ``kubeflow.org/v1`` PyTorchJob of the Kubeflow training operator.

    A fixed-size job is a Master and N-1 Workers (the operator allows exactly one
    master). An elastic one is N Workers and an ``elasticPolicy``: the operator
    scales Workers between ``min_nodes`` and ``max_nodes``, and a master, which
    cannot be scaled, would pin the rendezvous to one pod.
    """

    def replicas(count: int) -> Object:
        return {
            "replicas": count,
            "restartPolicy": "OnFailure",
            "template": pod_template(job, "pytorchjob", "OnFailure"),
        }

    run_policy: Object = {"backoffLimit": job.max_restarts}
    spec: Object = {"nprocPerNode": str(job.gpus_per_node)}
    if job.elastic:
        spec["elasticPolicy"] = {
            "rdzvBackend": "c10d",
            "rdzvPort": job.rdzv_port,
            "minReplicas": job.min_nodes,
            "maxReplicas": job.max_nodes,
            "maxRestarts": job.max_restarts,
        }
        spec["pytorchReplicaSpecs"] = {"Worker": replicas(job.nodes)}
    else:
        spec["pytorchReplicaSpecs"] = {"Master": replicas(1)}
        if job.nodes > 1:
            spec["pytorchReplicaSpecs"]["Worker"] = replicas(job.nodes - 1)
    if job.queue is not None:
        run_policy["suspend"] = True
    spec["runPolicy"] = run_policy
    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": metadata(job, queued=True),
            "spec": spec,
        }
    ]


def volcano_job(job: TrainingJob) -> list[Object]:
    """The Indexed Job gang-scheduled by Volcano: a PodGroup, a Service, the Job.

    Volcano binds no pod until ``minMember`` of them (``min_nodes``) fit at once,
    so a half-placed job never holds GPUs while it waits for the rest.

    Raises:
        ValueError: ``job.queue`` is set: Kueue and Volcano would both gate the job.
    """
    if job.queue is not None:
        raise ValueError(
            f"queue must be None for the Volcano job, got {job.queue!r}: Kueue and "
            f"Volcano would both gate its admission; render job, jobset or pytorchjob"
        )
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": metadata(job),
        "spec": {
            "minMember": job.min_nodes,
            "minResources": {job.gpu_resource: job.min_nodes * job.gpus_per_node},
        },
    }
    service, batch_job = plain_job(job, "volcano")
    template = batch_job["spec"]["template"]
    template["metadata"].setdefault("annotations", {})[VOLCANO_GROUP] = job.name
    template["spec"]["schedulerName"] = "volcano"
    return [group, service, batch_job]


def compute_domain(job: TrainingJob) -> Object:
    """The ``ComputeDomain`` whose IMEX channel every pod of ``job`` claims.

    The driver starts an IMEX daemon on each node where a pod claiming the channel
    lands, joins those daemons into one IMEX domain, and generates the
    ResourceClaimTemplate named in ``channel``. ``numNodes`` is 0, as the CRD
    recommends with the driver's default ``IMEXDaemonsWithDNSNames``: a pod starts
    once its own node's daemon is up, and torchrun's rendezvous waits for the rest.

    Raises:
        ValueError: ``job.compute_domain`` is not set.
    """
    if job.compute_domain is None:
        raise ValueError("job.compute_domain must name the ComputeDomain, got None")
    meta = metadata(job)
    meta["name"] = job.compute_domain
    return {
        "apiVersion": COMPUTE_DOMAIN_API,
        "kind": "ComputeDomain",
        "metadata": meta,
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": job.compute_domain}},
        },
    }


def trainjob(job: TrainingJob) -> list[Object]:
    """A Kubeflow Trainer v2 ``TrainJob`` on the ``torch-distributed`` runtime.

    The runtime (a ``ClusterTrainingRuntime`` the platform installs) holds the
    JobSet template; the TrainJob gives the trainer's image, command, nodes and
    resources, and the trainer's torch plugin sets torchrun's ``PET_NNODES``,
    ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK`` and ``PET_MASTER_ADDR/PORT`` (pod 0
    of the JobSet), so the command is ``torchrun`` with no rendezvous flags. The
    rest of the book's pod (``/dev/shm``, the checkpoint volume, one pod per node,
    the GPU toleration, RDMA) goes in as a ``runtimePatches`` entry.

    Raises:
        ValueError: the job is elastic, serves metrics or claims a ComputeDomain:
            Trainer v2's torch runtime runs a fixed size, and its patches can add
            neither a container port nor a resource claim.
    """
    if job.elastic:
        raise ValueError(
            f"min_nodes and max_nodes must equal nodes ({job.nodes}) for a TrainJob, "
            f"got {job.min_nodes}..{job.max_nodes}: the torch runtime is not elastic"
        )
    for arg in ("metrics_port", "compute_domain"):
        if getattr(job, arg) is not None:
            raise ValueError(
                f"{arg} must be None for a TrainJob, got {getattr(job, arg)!r}: its "
                f"runtimePatches cannot add a container port or a resource claim"
            )
    pod = pod_template(job, "jobset", "Never")
    (container,) = pod["spec"]["containers"]
    patch_container: Object = {
        "name": TRAINER_NODE,
        "volumeMounts": container["volumeMounts"],
    }
    if "securityContext" in container:
        patch_container["securityContext"] = container["securityContext"]
    patch_pod = {
        "metadata": pod["metadata"],
        "spec": {
            "containers": [patch_container],
            "volumes": pod["spec"]["volumes"],
            "affinity": pod["spec"]["affinity"],
            "tolerations": pod["spec"]["tolerations"],
        },
    }
    replicated = {"name": TRAINER_NODE, "template": {"spec": {"template": patch_pod}}}
    spec: Object = {
        "runtimeRef": {
            "name": TRAINER_RUNTIME,
            "kind": "ClusterTrainingRuntime",
            "apiGroup": TRAINER_API.split("/")[0],
        },
        "trainer": {
            "image": job.image,
            "command": ["torchrun", *job.command],
            "numNodes": job.nodes,
            "numProcPerNode": job.gpus_per_node,
            "resourcesPerNode": container["resources"],
            "env": container["env"],
        },
        "runtimePatches": [
            {
                "manager": TRAINER_PATCH_MANAGER,
                "trainingRuntimeSpec": {
                    "template": {"spec": {"replicatedJobs": [replicated]}}
                },
            }
        ],
    }
    if job.queue is not None:
        spec["suspend"] = True
    return [
        {
            "apiVersion": TRAINER_API,
            "kind": "TrainJob",
            "metadata": metadata(job, queued=True),
            "spec": spec,
        }
    ]


def with_compute_domain(
    render: Callable[[TrainingJob], list[Object]],
) -> Callable[[TrainingJob], list[Object]]:
    """``render`` preceded by the job's ComputeDomain when it claims one."""

    @functools.wraps(render)
    def objects(job: TrainingJob) -> list[Object]:
        found = render(job)
        return found if job.compute_domain is None else [compute_domain(job), *found]

    return objects


def monitored(
    render: Callable[[TrainingJob], list[Object]],
) -> Callable[[TrainingJob], list[Object]]:
    """``render`` followed by the job's PodMonitor when its pods serve metrics."""

    @functools.wraps(render)
    def objects(job: TrainingJob) -> list[Object]:
        found = render(job)
        return found if job.metrics_port is None else [*found, pod_monitor(job)]

    return objects


# What `aiinfra k8s render --kind` renders; `all` means the first three.
RENDERERS: dict[str, Callable[[TrainingJob], list[Object]]] = {
    kind: with_compute_domain(monitored(render))
    for kind, render in {
        "job": plain_job,
        "jobset": jobset,
        "pytorchjob": pytorchjob,
        "volcano": volcano_job,
    }.items()
}


def to_yaml(objects: list[Object]) -> str:
    """A multi-document YAML stream, keys in the order the functions above build."""
    yaml = require("yaml", "cloud")  # PyYAML: an optional package
    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)


#: The ComputeDomain of the reference IMEX job (``deploy/k8s/jobset-imex.yaml``).
REFERENCE_COMPUTE_DOMAIN = "aiinfra-train-imex"
