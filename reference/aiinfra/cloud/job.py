"""A multi-node training job, described once: the record every manifest is built from.

A torchrun job on Kubernetes is one pod per node, each pod running ``torchrun`` with
``--nproc-per-node`` set to the GPUs it holds; the pods find each other through a
c10d rendezvous hosted by pod 0, whose DNS name depends on the controller that made
it (an Indexed Job, a JobSet or a PyTorchJob). :class:`TrainingJob` holds what the
user chooses (image, command, nodes, GPUs, elastic range, Kueue queue) and rejects a
job that cannot run before any manifest is written; :mod:`aiinfra.cloud.manifests`
turns it into Kubernetes objects. Notation: N nodes (pods), G GPUs per pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Names Kubernetes gives pods, as DNS labels: lowercase alphanumerics and '-'.
DNS_LABEL_MAX = 63
DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")  # Service and PyTorchJob names
DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # namespaces, queues
# A prefix (DNS subdomain) and a qualified name, as rdma/rdma_shared_device_a.
RESOURCE_NAME = re.compile(
    r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
)
CPU = re.compile(r"\d+(\.\d+)?m?")  # "16", "0.5", "500m"
BINARY_SUFFIXES = {"": 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
# The JobSet's one replicated job: its pods are <name>-node-<job>-<pod>.<name>.
REPLICATED_JOB = "node"
KINDS = ("job", "jobset", "pytorchjob", "volcano")
# Set in torchrun's environment for restarts: a restarted group must not reuse the
# agent's store, which still holds the last attempt's addresses (pytorch#135712).
RESTART_ENV = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
REFERENCE_NAME = "aiinfra-train"  # the book's reference job (aiinfra k8s render)
# The label every object and pod of a job carries, set to the job's name.
POD_LABEL = "app.kubernetes.io/instance"
# The entry point serves its metrics on the port this variable names
# (aiinfra.cloud.train); the pod sets it to the container port it declares.
METRICS_PORT_ENV = "AIINFRA_METRICS_PORT"
CKPT_MOUNT = "/ckpt"  # where the checkpoints' shared volume is mounted


def memory_bytes(quantity: str, arg: str) -> int:
    """Bytes of a binary memory quantity, ``"64Gi"``; ``arg`` names it in errors."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", quantity)
    if not m or int(m[1]) == 0:
        raise ValueError(
            f"{arg} must be a positive memory quantity with a binary suffix "
            f"(Ki, Mi, Gi, Ti), e.g. '64Gi', got {quantity!r}"
        )
    return int(m[1]) * BINARY_SUFFIXES[m[2] or ""]


@dataclass(frozen=True)
class TrainingJob:
    """A torchrun job of ``nodes`` pods, one per node, ``gpus_per_node`` GPUs each.

    Args:
        name: the job's name, a DNS-1035 label; pod hostnames are built from it.
        image: the container image that holds the training code.
        command: what torchrun runs, e.g. ``("-m", "aiinfra.cli", "bench", ...)``.
        nodes: N, the pods (one per node) the job starts with.
        gpus_per_node: G, GPUs each pod requests, and torchrun's processes per pod.
        node_gpus: GPUs a node has; a pod cannot ask for more.
        min_nodes: fewest nodes an elastic job runs on (default: ``nodes``).
        max_nodes: most nodes an elastic job runs on (default: ``nodes``).
        max_restarts: restarts of the whole worker group before the job fails.
        rdzv_port: the TCP port of the c10d rendezvous on pod 0.
        namespace: the Kubernetes namespace of every object.
        queue: a Kueue LocalQueue; when set, the job waits suspended for admission.
        gpu_resource: the extended resource of the device plugin.
        cpu: CPU request per pod: a loader worker and an NCCL proxy thread per GPU.
        memory: memory request and limit per pod; ``/dev/shm`` counts against it.
        shm_size: size of ``/dev/shm``; loader workers pass batches through it and
            a container's default 64 MiB is too small for them.
        rdma: give each pod the node's RDMA NICs (device plugin resource,
            ``IPC_LOCK``, a Multus secondary network, NCCL's IB environment), as
            the NVIDIA Network Operator sets a cluster up; without it NCCL runs
            over the pod network's sockets.
        rdma_resource: the RDMA device plugin's resource, one per pod; the shared
            device plugin names them ``rdma/<resourceName>``.
        rdma_network: the NetworkAttachmentDefinition Multus attaches (the name of
            the operator's MacvlanNetwork, IPoIBNetwork or HostDeviceNetwork).
        metrics_port: the container port on which the entry point serves
            ``/metrics`` (passed as ``AIINFRA_METRICS_PORT``), scraped by the
            job's PodMonitor; ``None``: the pods serve no metrics.
        ckpt_claim: a ReadWriteMany PersistentVolumeClaim mounted at ``/ckpt`` in
            every pod: each rank writes its shard of a checkpoint there and every
            rank of a restarted group reads them all; ``None``: no volume.
        topology_level: a node label of Kueue's Topology (``TOPOLOGY_LEVELS``):
            Kueue's topology-aware scheduling places all pods in one domain of
            that level (one rack, one block); needs ``queue``.
        topology_required: the domain is a requirement (the job waits for one
            with room); ``False``: a preference (Kueue tries the next level up).
        compute_domain: the name of an NVIDIA DRA driver ComputeDomain the job
            makes: each pod claims one IMEX channel of it through the
            ResourceClaimTemplate of that name, so that the pods of a multi-node
            NVLink rack (GB200 NVL72) share GPU memory over NVLink.

    Raises:
        ValueError: an argument that no cluster can run, named with its constraint.
        TypeError: ``command`` is a string instead of a sequence of strings.
    """

    name: str
    image: str
    command: tuple[str, ...]
    nodes: int
    gpus_per_node: int
    node_gpus: int = 8
    min_nodes: int | None = None
    max_nodes: int | None = None
    max_restarts: int = 3
    rdzv_port: int = 29400  # torchrun's default rendezvous port
    namespace: str = "default"
    queue: str | None = None
    gpu_resource: str = "nvidia.com/gpu"
    cpu: str = "16"
    memory: str = "128Gi"
    shm_size: str = "32Gi"
    rdma: bool = False
    rdma_resource: str = "rdma/rdma_shared_device_a"
    rdma_network: str = "rdma-net"
    metrics_port: int | None = None
    ckpt_claim: str | None = None
    topology_level: str | None = None
    topology_required: bool = True
    compute_domain: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.command, str):
            raise TypeError(
                f"command must be a sequence of strings, e.g. ('-m', 'pkg'), got the "
                f"string {self.command!r}"
            )
        object.__setattr__(self, "command", tuple(self.command))
        for arg in ("nodes", "gpus_per_node", "node_gpus"):
            if getattr(self, arg) < 1:
                raise ValueError(f"{arg} must be >= 1, got {getattr(self, arg)}")
        if self.gpus_per_node > self.node_gpus:
            raise ValueError(
                f"gpus_per_node must be <= node_gpus ({self.node_gpus}), got "
                f"{self.gpus_per_node}: a pod cannot span nodes"
            )
        if self.min_nodes is None:
            object.__setattr__(self, "min_nodes", self.nodes)
        if self.max_nodes is None:
            object.__setattr__(self, "max_nodes", self.nodes)
        # Elastic range: torchrun --nnodes min:max, starting with `nodes` pods.
        if not 1 <= self.min_nodes <= self.nodes:
            raise ValueError(
                f"min_nodes must be in 1..nodes ({self.nodes}), got {self.min_nodes}"
            )
        if self.max_nodes < self.nodes:
            raise ValueError(
                f"max_nodes must be >= nodes ({self.nodes}), got {self.max_nodes}"
            )
        self._check_names()
        if not self.command or not all(isinstance(a, str) and a for a in self.command):
            raise ValueError(f"command must be non-empty strings, got {self.command!r}")
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if not 1 <= self.rdzv_port <= 65535:
            raise ValueError(f"rdzv_port must be in 1..65535, got {self.rdzv_port}")
        if self.metrics_port is not None and not (
            1 <= self.metrics_port <= 65535 and self.metrics_port != self.rdzv_port
        ):
            raise ValueError(
                f"metrics_port must be in 1..65535 and differ from rdzv_port "
                f"({self.rdzv_port}), got {self.metrics_port}"
            )
        if not CPU.fullmatch(self.cpu) or float(self.cpu.rstrip("m")) == 0:
            raise ValueError(
                f"cpu must be a positive CPU quantity ('16', '0.5', '500m'), got "
                f"{self.cpu!r}"
            )
        if self.topology_level is not None and not RESOURCE_NAME.fullmatch(
            self.topology_level
        ):
            raise ValueError(
                f"topology_level must be a prefixed node label such as "
                f"'kubernetes.io/hostname', got {self.topology_level!r}"
            )
        if self.topology_level is not None and self.queue is None:
            raise ValueError(
                f"topology_level {self.topology_level!r} needs a queue: only Kueue "
                f"places a job by topology"
            )
        if memory_bytes(self.shm_size, "shm_size") > memory_bytes(
            self.memory, "memory"
        ):
            raise ValueError(
                f"shm_size must be <= memory ({self.memory}), got {self.shm_size}: "
                f"/dev/shm is memory, charged to the pod's limit"
            )

    def _check_names(self) -> None:
        """Names that end up in DNS, labels and resource keys."""
        if not DNS_1035.fullmatch(self.name):
            raise ValueError(
                f"name must be a DNS-1035 label (lowercase letters, digits and '-', "
                f"starting with a letter, ending with a letter or digit), got "
                f"{self.name!r}"
            )
        # The longest hostname any controller builds: the JobSet's last pod.
        longest = f"{self.name}-{REPLICATED_JOB}-0-{self.max_nodes - 1}"
        if len(longest) > DNS_LABEL_MAX:
            room = DNS_LABEL_MAX - (len(longest) - len(self.name))
            raise ValueError(
                f"name must be <= {room} chars, so that pod hostnames such as "
                f"{longest!r} fit in a {DNS_LABEL_MAX}-char DNS label, got "
                f"{len(self.name)}"
            )
        if not self.image.strip() or any(c.isspace() for c in self.image):
            raise ValueError(f"image must be a non-empty reference, got {self.image!r}")
        for arg in (
            "namespace",
            "queue",
            "rdma_network",
            "ckpt_claim",
            "compute_domain",
        ):
            value = getattr(self, arg)
            if value is not None and not (
                DNS_1123.fullmatch(value) and len(value) <= DNS_LABEL_MAX
            ):
                raise ValueError(
                    f"{arg} must be a DNS-1123 label (<= 63 lowercase letters, digits "
                    f"and '-'), got {value!r}"
                )
        for arg, example in [
            ("gpu_resource", "nvidia.com/gpu"),
            ("rdma_resource", "rdma/rdma_shared_device_a"),
        ]:
            if not RESOURCE_NAME.fullmatch(getattr(self, arg)):
                raise ValueError(
                    f"{arg} must be a domain-qualified resource name such as "
                    f"{example!r}, got {getattr(self, arg)!r}"
                )

    @property
    def elastic(self) -> bool:
        """Whether the job may run on fewer or more nodes than it starts with."""
        return self.min_nodes < self.max_nodes

    def head_host(self, kind: str = "job") -> str:
        """Pod 0's DNS name under controller ``kind``: the rendezvous every pod dials.

        Args:
            kind: ``job`` and ``volcano`` (an Indexed Job: hostname
                ``<job>-<index>``, subdomain the headless Service), ``jobset``
                (``<jobset>-<replicated job>-<job>-<pod>``, subdomain the JobSet)
                or ``pytorchjob`` (the training operator's Service per replica:
                the master, or worker 0 when elastic, as it has no master).

        Raises:
            ValueError: ``kind`` is none of these.
        """
        if kind in ("job", "volcano"):
            return f"{self.name}-0.{self.name}"
        if kind == "jobset":
            return f"{self.name}-{REPLICATED_JOB}-0-0.{self.name}"
        if kind == "pytorchjob":
            return f"{self.name}-{'worker' if self.elastic else 'master'}-0"
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")

    def torchrun_args(self, kind: str = "job") -> tuple[str, ...]:
        """Arguments of ``torchrun`` on every pod: rendezvous flags, then ``command``.

        Args:
            kind: the controller, which names pod 0 (:meth:`head_host`).

        Returns:
            e.g. ``("--nnodes", "2", "--nproc-per-node", "8", "--rdzv-backend",
            "c10d", "--rdzv-endpoint", "train-0.train:29400", ..., "-m", ...)``;
            ``--nnodes`` is ``min:max`` when the job is elastic.
        """
        nnodes = f"{self.min_nodes}:{self.max_nodes}" if self.elastic else self.nodes
        flags = {
            "--nnodes": str(nnodes),
            "--nproc-per-node": str(self.gpus_per_node),
            "--rdzv-backend": "c10d",
            "--rdzv-endpoint": f"{self.head_host(kind)}:{self.rdzv_port}",
            "--rdzv-id": self.name,
            "--max-restarts": str(self.max_restarts),
        }
        return (*(word for pair in flags.items() for word in pair), *self.command)
