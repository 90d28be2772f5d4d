"""What ``docs/cloud/kubernetes.rst`` shows: one job, its manifests, its scheduling.

Everything is rendered from the book's reference job (the defaults of ``aiinfra k8s
render``) by :mod:`aiinfra.cloud.manifests`; the schemas are those of
:mod:`aiinfra.cloud.crds`, and the scheduling figure is the simulation of
:mod:`aiinfra.cloud.gang`.
"""

from __future__ import annotations

import re
from dataclasses import replace

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Patch

from aiinfra.cloud import crds, gang, kueue
from aiinfra.cloud import manifests as k8s
from aiinfra.cloud.cli import REFERENCE_COMMAND, REFERENCE_IMAGE, REFERENCE_NAME
from aiinfra.cloud.job import TrainingJob
from aiinfra.hardware.rails import GB200_NVL72
from aiinfra.report import Table

__all__ = [
    "GANG_HORIZON",
    "GANG_JOBS",
    "GANG_NODES",
    "NVL72_TRAY_GPUS",
    "controllers_table",
    "dra_kubernetes_version",
    "gang_figure",
    "gang_frames",
    "gang_table",
    "imex_figure",
    "imex_nodes",
    "job_figure",
    "kueue_table",
    "kubernetes_version",
    "pod_table",
    "rdma_figure",
    "rdma_table",
    "tas_table",
    "reference_gpus",
    "reference_nodes",
    "refused_message",
    "schemas_table",
    "torchrun_table",
    "trainjob_table",
]

#: The two-node cluster of the scheduling figure and its two jobs (pods, steps).
GANG_NODES = 2
GANG_JOBS = (gang.Job("A", 2, 3), gang.Job("B", 2, 3))
#: Steps the scheduling figure simulates.
GANG_HORIZON = 8


def _job() -> TrainingJob:
    """The reference job: 2 nodes of 8 GPUs running the collectives benchmark."""
    return TrainingJob(REFERENCE_NAME, REFERENCE_IMAGE, REFERENCE_COMMAND, 2, 8)


def reference_nodes() -> int:
    """Nodes (pods) of the reference job."""
    return _job().nodes


def reference_gpus() -> int:
    """GPUs per node of the reference job."""
    return _job().gpus_per_node


def _pod(kind: str = "job") -> dict:
    """The reference job's pod spec under controller ``kind``."""
    return k8s.pod_template(_job(), kind, "Never")["spec"]


def pod_table() -> Table:
    """What each pod of the reference job asks of its node."""
    spec = _pod()
    (container,) = spec["containers"]
    res = container["resources"]
    (shm,) = spec["volumes"]
    (term,) = spec["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    rows = [
        ["GPUs (limits, nvidia.com/gpu)", res["limits"]["nvidia.com/gpu"]],
        ["CPU (requests)", res["requests"]["cpu"]],
        ["memory (requests = limits)", res["limits"]["memory"]],
        ["/dev/shm (memory-backed emptyDir)", shm["emptyDir"]["sizeLimit"]],
        ["pods of this job per node (anti-affinity)", f"1 ({term['topologyKey']})"],
        ["tolerates the taint", spec["tolerations"][0]["key"]],
    ]
    return Table(
        ["the pod asks for", "value"],
        rows,
        note="From the pod template that aiinfra k8s render writes for every kind.",
    )


def _rdma_pod() -> tuple[TrainingJob, dict, dict, dict[str, str]]:
    """The reference job with ``--rdma`` and its pod: template, container, env."""
    job = TrainingJob(
        REFERENCE_NAME, REFERENCE_IMAGE, REFERENCE_COMMAND, 2, 8, rdma=True
    )
    template = k8s.pod_template(job, "jobset", "Never")
    (container,) = template["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    return job, template, container, env


def rdma_table() -> Table:
    """What ``--rdma`` adds to the reference job's pod, read from the rendered pod."""
    job, template, container, env = _rdma_pod()
    network = template["metadata"]["annotations"][k8s.MULTUS_NETWORKS]
    nics = container["resources"]["limits"][job.rdma_resource]
    rows = [
        [
            "metadata.annotations",
            f"{k8s.MULTUS_NETWORKS}: {network}",
            "Multus adds the secondary interface (net1) on the RDMA NIC",
        ],
        [
            "resources.limits",
            f"{job.rdma_resource}: {nics}",
            "the RDMA device plugin mounts the verbs devices (/dev/infiniband)",
        ],
        [
            "securityContext.capabilities.add",
            ", ".join(container["securityContext"]["capabilities"]["add"]),
            "lets NCCL pin the memory it registers with the NIC",
        ],
    ]
    meaning = {
        "NCCL_NET": "verbs or an error, never a silent fallback to sockets",
        "NCCL_IB_HCA": "the HCAs NCCL uses (a prefix: every mlx5 device)",
        "NCCL_SOCKET_IFNAME": "bootstrap on the pod network; data over verbs",
    }
    rows += [[name, env[name], meaning[name]] for name in k8s.RDMA_ENV]
    return Table(
        ["field", "value", "what it does"],
        rows,
        note="The pod of aiinfra k8s render --rdma (deploy/k8s/jobset-rdma.yaml).",
        words=(2,),
    )


def rdma_figure() -> Figure:
    """The RDMA pod's two networks: eth0 for names and bootstrap, net1 for NCCL."""
    job, template, container, env = _rdma_pod()
    network = template["metadata"]["annotations"][k8s.MULTUS_NETWORKS]
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.add_patch(
        FancyBboxPatch(
            (0.04, 0.08),
            0.46,
            0.8,
            boxstyle="round,pad=0.01",
            fc="#f0f0f0",
            ec="#777777",
        )
    )
    ax.text(0.27, 0.82, "node", ha="center", fontsize=11)
    ax.add_patch(
        FancyBboxPatch(
            (0.07, 0.14),
            0.4,
            0.62,
            boxstyle="round,pad=0.01",
            fc="#c6dbef",
            ec="#3182bd",
        )
    )
    ax.text(0.27, 0.7, "pod: torchrun, one worker per GPU", ha="center", fontsize=9)
    ax.text(
        0.27,
        0.62,
        f"{', '.join(container['securityContext']['capabilities']['add'])}: "
        "pinned memory",
        ha="center",
        fontsize=9,
    )
    links = [
        (
            0.48,
            f"{env['NCCL_SOCKET_IFNAME']} (pod network)",
            "pod network: DNS, rendezvous, NCCL bootstrap",
            "#777777",
        ),
        (
            0.26,
            f"net1 ({network}), /dev/infiniband",
            f"RDMA NIC ({env['NCCL_IB_HCA']}): NCCL's data over verbs",
            "#d62728",
        ),
    ]
    for y, inside, outside, color in links:
        ax.text(0.27, y, inside, ha="center", fontsize=9, color=color)
        ax.annotate(
            "",
            xy=(0.62, y + 0.01),
            xytext=(0.45, y + 0.01),
            arrowprops={"arrowstyle": "<->", "color": color, "lw": 1.5},
        )
        ax.text(0.63, y, outside, ha="left", fontsize=9, color=color)
    ax.text(
        0.27,
        0.18,
        f"limits: {job.rdma_resource}: "
        f"{container['resources']['limits'][job.rdma_resource]}",
        ha="center",
        fontsize=9,
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig


def kueue_table() -> Table:
    """The waitForPodsReady block of Kueue's Configuration that the book renders."""
    ready = kueue.kueue_configuration()["waitForPodsReady"]
    strategy = ready["requeuingStrategy"]
    rows = [
        [
            "waitForPodsReady.enable",
            str(ready["enable"]).lower(),
            "admission waits for ready pods",
        ],
        [
            "waitForPodsReady.timeout",
            ready["timeout"],
            "pods not all ready by then: evict, release quota, requeue",
        ],
        [
            "waitForPodsReady.blockAdmission",
            str(ready["blockAdmission"]).lower(),
            "admit nothing else until the admitted job's pods are ready",
        ],
        [
            "waitForPodsReady.requeuingStrategy.timestamp",
            strategy["timestamp"],
            "a requeued job queues by its eviction time",
        ],
        [
            "waitForPodsReady.requeuingStrategy.backoffLimitCount",
            strategy["backoffLimitCount"],
            "requeues before the job is deactivated",
        ],
    ]
    return Table(
        ["field", "value", "what it does"],
        rows,
        note="From aiinfra k8s kueue (deploy/kueue/config.yaml).",
        words=(2,),
    )


def torchrun_table() -> Table:
    """The flags torchrun gets on every pod of the reference job (plain Job)."""
    args = list(_job().torchrun_args("job"))
    flags = [(args[i], args[i + 1]) for i in range(0, 12, 2)]
    meaning = {
        "--nnodes": "nodes, or min:max for an elastic job",
        "--nproc-per-node": "workers per pod, one per GPU",
        "--rdzv-backend": "rendezvous through a TCP store",
        "--rdzv-endpoint": "pod 0's stable DNS name and port",
        "--rdzv-id": "the run every agent joins",
        "--max-restarts": "restarts of the whole worker group",
    }
    rows = [[flag, value, meaning[flag]] for flag, value in flags]
    return Table(
        ["flag", "value", "what it sets"],
        rows,
        note="Then the training command: {command}.",
        words=(2,),
        fields={"command": " ".join(REFERENCE_COMMAND)},
    )


def _pods(objects: list[dict]) -> int:
    """Pods the objects create: Indexed Jobs' completions, operator replicas."""
    count = 0
    for obj in objects:
        spec = obj.get("spec", {})
        if obj["kind"] in ("Job",):
            count += spec["completions"]
        elif obj["kind"] == "JobSet":
            count += sum(
                r["replicas"] * r["template"]["spec"]["completions"]
                for r in spec["replicatedJobs"]
            )
        elif obj["kind"] == "PyTorchJob":
            count += sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
    return count


def controllers_table() -> Table:
    """The four controllers the one description renders to."""
    job = _job()
    restarts = {
        "job": "the Job re-creates failed pods (backoffLimit)",
        "jobset": "the JobSet re-creates all its Jobs (failurePolicy)",
        "pytorchjob": "the training operator restarts replicas",
        "volcano": "the Job, scheduled by Volcano as one group",
    }
    rows = []
    for kind, render in k8s.RENDERERS.items():
        objects = render(job)
        rows.append(
            [
                kind,
                ", ".join(o["kind"] for o in objects),
                _pods(objects),
                job.head_host(kind),
                restarts[kind],
            ]
        )
    return Table(
        ["render", "objects", "pods", "rendezvous host (pod 0)", "restarts"],
        rows,
        note="Each pod runs torchrun with the same flags; only pod 0's name differs.",
        words=(4,),
    )


def job_figure() -> Figure:
    """The reference job as a plain Indexed Job: pods on nodes, pod 0 the rendezvous."""
    job = _job()
    fig = Figure(figsize=(9, 4.2), layout="constrained")
    ax = fig.add_subplot()
    width = 0.4
    for i in range(job.nodes):
        x0 = 0.06 + i * 0.5
        ax.add_patch(
            FancyBboxPatch(
                (x0, 0.08),
                width,
                0.62,
                boxstyle="round,pad=0.01",
                fc="#f0f0f0",
                ec="#777777",
            )
        )
        ax.text(x0 + width / 2, 0.64, f"node {i}", ha="center", fontsize=11)
        ax.add_patch(
            FancyBboxPatch(
                (x0 + 0.02, 0.14),
                width - 0.04,
                0.42,
                boxstyle="round,pad=0.01",
                fc="#c6dbef",
                ec="#3182bd",
            )
        )
        host = f"{job.name}-{i}.{job.name}"
        ax.text(x0 + width / 2, 0.5, f"pod {host}", ha="center", fontsize=9)
        ax.text(x0 + width / 2, 0.43, "torchrun agent", ha="center", fontsize=9)
        for g in range(job.gpus_per_node):
            gx = x0 + 0.04 + g * (width - 0.08) / (job.gpus_per_node - 1)
            ax.scatter(gx, 0.27, s=120, marker="s", color="#31a354", zorder=3)
        ax.text(x0 + width / 2, 0.17, "one worker per GPU", ha="center", fontsize=9)
        if i > 0:
            ax.annotate(
                "",
                xy=(0.06 + width - 0.02, 0.46),
                xytext=(x0 + 0.02, 0.46),
                arrowprops={"arrowstyle": "->", "color": "#d62728", "lw": 1.5},
            )
    ax.text(
        0.5,
        0.86,
        f"headless Service {job.name}: a DNS name per pod; rendezvous on pod 0, "
        f"port {job.rdzv_port}",
        ha="center",
        fontsize=10,
        color="#d62728",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig


# The fabric level the book's TAS example asks for: one rack (one leaf switch).
_TAS_LEVEL = kueue.TOPOLOGY_LEVELS[1]


def tas_table() -> Table:
    """The objects of the rendered topology-aware example and what each sets."""
    job = replace(_job(), queue="team-a", topology_level=_TAS_LEVEL)
    topology, flavor, cluster_queue, local_queue = kueue.tas_objects(job, job.nodes)
    template = k8s.RENDERERS["jobset"](job)[0]["spec"]["replicatedJobs"][0]
    annotations = template["template"]["spec"]["template"]["metadata"]["annotations"]
    (quota,) = cluster_queue["spec"]["resourceGroups"][0]["flavors"]
    gpus = {r["name"]: r["nominalQuota"] for r in quota["resources"]}
    rows = [
        [
            "Topology",
            "spec.levels",
            ", ".join(level["nodeLabel"] for level in topology["spec"]["levels"]),
            "the fabric's levels, coarsest first, as node labels",
        ],
        [
            "ResourceFlavor",
            "spec.topologyName",
            flavor["spec"]["topologyName"],
            "admission checks each domain's free nodes, not only quota",
        ],
        [
            "ClusterQueue",
            "flavors[].resources[].nominalQuota",
            f"{quota['name']}, {job.gpu_resource}: {gpus[job.gpu_resource]}",
            "the flavor's quota, here the job's size",
        ],
        [
            "LocalQueue",
            "spec.clusterQueue",
            local_queue["spec"]["clusterQueue"],
            "the queue the job names in its label",
        ],
        [
            "JobSet",
            "template.metadata.annotations",
            "; ".join(f"{k}: {v}" for k, v in annotations.items()),
            "all pods in one domain of that level, or wait",
        ],
    ]
    return Table(
        ["kind", "field", "value", "what it does"],
        rows,
        note="deploy/k8s/jobset-tas.yaml: the reference job with a queue and a rack "
        "requirement; Kueue v1beta2's fields.",
        words=(3,),
    )


def gang_table() -> Table:
    """What gang scheduling adds to the manifests, with Kueue and with Volcano."""
    queued = TrainingJob(
        REFERENCE_NAME, REFERENCE_IMAGE, REFERENCE_COMMAND, 2, 8, queue="team-a"
    )
    (_, job) = k8s.plain_job(queued)
    group, _, vjob = k8s.volcano_job(_job())
    rows = [
        ["Kueue", "metadata.labels", f"{k8s.QUEUE_LABEL}: team-a"],
        ["Kueue", "spec.suspend", str(job["spec"]["suspend"]).lower()],
        ["Volcano", "PodGroup spec.minMember", group["spec"]["minMember"]],
        [
            "Volcano",
            "spec.schedulerName",
            vjob["spec"]["template"]["spec"]["schedulerName"],
        ],
    ]
    return Table(
        ["scheduler", "field", "value"],
        rows,
        note="The reference job rendered with a queue (Kueue), and for Volcano.",
    )


_GANG_COLORS = {"A": "#3182bd", "B": "#e6550d"}
_GANG_TITLES = (
    (False, "pod by pod: each job holds one node and waits for the other"),
    (True, "as gangs: a job is admitted only when all its pods fit"),
)


def _draw_gang(axes: list, upto: int, fontsize: float) -> None:
    """Both policies' first ``upto`` steps: a bar per node a job holds in a step."""
    for ax, (is_gang, title) in zip(axes, _GANG_TITLES, strict=True):
        steps = gang.schedule(GANG_NODES, list(GANG_JOBS), is_gang, GANG_HORIZON)
        for t, held in enumerate(steps[:upto]):
            row = 0
            for j in GANG_JOBS:
                for _ in range(held[j.name]):
                    running = held[j.name] == j.pods
                    ax.barh(
                        row,
                        1,
                        left=t,
                        color=_GANG_COLORS[j.name],
                        alpha=1.0 if running else 0.35,
                        edgecolor="white",
                    )
                    row += 1
        ax.set_xlim(0, GANG_HORIZON)
        ax.set_ylim(-0.6, GANG_NODES - 0.4)
        labels = [f"node {n}" for n in range(GANG_NODES)]
        ax.set_yticks(range(GANG_NODES), labels, fontsize=fontsize)
        ax.tick_params(labelsize=fontsize)
        ax.set_title(title, fontsize=fontsize)
    axes[-1].set_xlabel(
        "time step (light: holding a node, waiting; dark: running)", fontsize=fontsize
    )
    handles = [Patch(color=c, label=f"job {name}") for name, c in _GANG_COLORS.items()]
    axes[0].legend(handles=handles, loc="upper right", fontsize=fontsize * 0.9)


def gang_figure() -> Figure:
    """Two 2-node jobs on 2 nodes: placed pod by pod, and admitted as gangs."""
    fig = Figure(figsize=(9, 3.8), layout="constrained")
    _draw_gang(fig.subplots(2, 1, sharex=True), GANG_HORIZON, 10)
    return fig


def gang_frames() -> list[Figure]:
    """The same two schedules, one time step more on each frame."""
    frames = []
    for upto in range(1, GANG_HORIZON + 1):
        fig = Figure(figsize=(10, 5), layout="constrained")
        _draw_gang(fig.subplots(2, 1, sharex=True), upto, 15)
        frames.append(fig)
    return frames


def kubernetes_version() -> str:
    """The Kubernetes version whose schemas the built-in objects must fit."""
    return crds.KUBERNETES_VERSION


def dra_kubernetes_version() -> str:
    """The Kubernetes version whose schema the pods with DRA claims must fit."""
    return crds.DRA_KUBERNETES_VERSION


def schemas_table() -> Table:
    """The schema each rendered kind is checked against, and where it comes from."""
    rows = [["Service, Job", f"Kubernetes {crds.KUBERNETES_VERSION} OpenAPI", "-"]]
    for key in crds.CRDS:
        source = crds.crd_source(key)
        repo = re.search(r"github\.com/([\w.-]+/[\w.-]+)", source)[1]
        tag = re.search(r"tag (v[\d.]+)", source)[1]
        rows.append([key.rsplit("/", 1)[1], f"{repo} CRD", tag])
    return Table(
        ["kind", "schema", "release"],
        rows,
        note="Checked in strict mode: an unknown field fails, as kubectl apply fails.",
    )


def refused_message() -> str:
    """The error a job asking for more GPUs than a node has gets, before rendering."""
    try:
        TrainingJob(REFERENCE_NAME, REFERENCE_IMAGE, REFERENCE_COMMAND, 2, 16)
    except ValueError as exc:
        return str(exc)
    raise AssertionError("a 16-GPU pod on an 8-GPU node was accepted")


#: GPUs in one compute tray (node) of a GB200 NVL72 rack: two Grace-Blackwell
#: superchips of two GPUs each.
NVL72_TRAY_GPUS = 4
#: Trays (pods) of the figure's IMEX job: 16 of the rack's 72 GPUs.
_IMEX_NODES = 4


def _imex_job() -> TrainingJob:
    """A job of whole NVL72 trays, its pods on one ComputeDomain."""
    return TrainingJob(
        REFERENCE_NAME,
        REFERENCE_IMAGE,
        REFERENCE_COMMAND,
        _IMEX_NODES,
        NVL72_TRAY_GPUS,
        node_gpus=NVL72_TRAY_GPUS,
        compute_domain=k8s.REFERENCE_COMPUTE_DOMAIN,
    )


def imex_nodes() -> int:
    """Trays (pods) of the IMEX figure's job."""
    return _imex_job().nodes


def imex_figure() -> Figure:
    """An NVL72 rack: the job's pods, their ComputeDomain and IMEX channels."""
    job = _imex_job()
    domain, jobset = k8s.RENDERERS["jobset"](job)
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    (claim,) = template["spec"]["resourceClaims"]
    trays = GB200_NVL72.gpus // NVL72_TRAY_GPUS
    fig = Figure(figsize=(10, 4.6), layout="constrained")
    ax = fig.add_subplot()
    step = 0.96 / trays
    used = job.nodes
    # The ComputeDomain: a dashed box around the trays holding the job's pods.
    ax.add_patch(
        FancyBboxPatch(
            (0.02, 0.2),
            used * step - 0.008,
            0.62,
            boxstyle="round,pad=0.006",
            fc="#fff5eb",
            ec="#e6550d",
            ls="--",
            lw=1.5,
        )
    )
    for t in range(trays):
        x0 = 0.02 + t * step
        mine = t < used
        ax.add_patch(
            FancyBboxPatch(
                (x0 + 0.004, 0.24),
                step - 0.016,
                0.4,
                boxstyle="round,pad=0.003",
                fc="#c6dbef" if mine else "#f0f0f0",
                ec="#3182bd" if mine else "#999999",
            )
        )
        for g in range(NVL72_TRAY_GPUS):
            ax.scatter(
                x0 + step / 2 - 0.004,
                0.3 + g * 0.075,
                s=40,
                marker="s",
                color="#31a354" if mine else "#bbbbbb",
                zorder=3,
            )
        if mine:
            ax.text(x0 + step / 2 - 0.004, 0.68, f"pod {t}", ha="center", fontsize=8)
            ax.text(x0 + step / 2 - 0.004, 0.75, "IMEX", ha="center", fontsize=7)
    # The NVLink switch trays: one NVLink domain under all the compute trays.
    ax.add_patch(
        FancyBboxPatch(
            (0.02, 0.06),
            0.95,
            0.08,
            boxstyle="round,pad=0.004",
            fc="#dadaeb",
            ec="#756bb1",
        )
    )
    ax.text(
        0.5,
        0.085,
        "NVLink switch trays: one NVLink domain for the whole rack",
        ha="center",
        fontsize=10,
    )
    for t in range(trays):
        x = 0.02 + t * step + step / 2 - 0.004
        ax.plot([x, x], [0.14, 0.24], color="#756bb1", lw=1)
    ax.text(
        0.02,
        0.9,
        f"ComputeDomain {domain['metadata']['name']}: "
        f"{claim['name']} claimed by each pod",
        ha="left",
        fontsize=10,
        color="#e6550d",
    )
    ax.text(
        0.02 + used * step + 0.01,
        0.72,
        "the rack's other trays: outside the domain, no access to its memory",
        ha="left",
        fontsize=10,
        color="#777777",
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    return fig


def trainjob_table() -> Table:
    """The reference job as a PyTorchJob and as a TrainJob: who sets what."""
    job = replace(_job(), ckpt_claim=None)
    (pt,) = k8s.pytorchjob(job)
    (tj,) = k8s.trainjob(job)
    master = pt["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    args = master["containers"][0]["args"]
    replicas = pt["spec"]["pytorchReplicaSpecs"]
    runtime = tj["spec"]["runtimeRef"]
    trainer = tj["spec"]["trainer"]
    rows = [
        ["API", f"{pt['apiVersion']} {pt['kind']}", f"{tj['apiVersion']} {tj['kind']}"],
        [
            "the pod template",
            "pytorchReplicaSpecs",
            f"{runtime['kind']} {runtime['name']}, runtimePatches",
        ],
        [
            "torchrun's size and rank",
            " ".join(args[: args.index("--rdzv-backend")]),
            "PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK",
        ],
        [
            "pod 0",
            job.head_host("pytorchjob"),
            f"PET_MASTER_ADDR = {job.head_host('jobset')}",
        ],
        [
            "nodes x GPUs",
            f"{sum(r['replicas'] for r in replicas.values())} x {job.gpus_per_node}",
            f"numNodes {trainer['numNodes']} x numProcPerNode "
            f"{trainer['numProcPerNode']}",
        ],
    ]
    return Table(
        ["", "PyTorchJob (training operator v1)", "TrainJob (Trainer v2)"],
        rows,
        note="Read from the objects that aiinfra.cloud.manifests renders for the "
        "reference job; PET_* are set by the runtime's torch plugin.",
    )
