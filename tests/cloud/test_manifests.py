"""The rendered manifests: valid against pinned schemas, one pod per node, all GPUs.

Built-in objects (Service, Job) are checked by kubernetes-validate in strict mode;
custom resources by the openAPIV3Schema of their CRDs (:mod:`aiinfra.cloud.crds`,
each naming its source), made strict as ``kubectl apply`` is (:func:`strict`).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import aiinfra.cli
import aiinfra.cloud.kueue as kueue
import aiinfra.cloud.manifests as k8s
import jsonschema
import kubernetes_validate
import pytest
import yaml
from aiinfra.cloud.crds import (
    CRDS,
    DRA_KUBERNETES_VERSION,
    KUBERNETES_VERSION,
    crd_schema,
)
from aiinfra.cloud.job import RESTART_ENV, TrainingJob

ROOT = Path(__file__).parents[2]
BENCH = ("-m", "aiinfra.cli", "bench", "collectives", "--backend", "nccl")
JOBS = {
    "2x8": TrainingJob("train", "ghcr.io/aiinfra/train:0.1.0", BENCH, 2, 8),
    "1x4": TrainingJob("solo", "img:1", ("-m", "x"), nodes=1, gpus_per_node=4),
    "elastic": TrainingJob("el", "img", BENCH, 2, 8, min_nodes=2, max_nodes=4),
    "queued": TrainingJob("q", "img", BENCH, 3, 8, queue="team-a", namespace="ml"),
    "rdma": TrainingJob("r", "img", BENCH, 2, 8, rdma=True, rdma_network="ib-a"),
    "tas": TrainingJob(
        "t", "img", BENCH, 2, 8, queue="a", topology_level="kubernetes.io/hostname"
    ),
    "monitored": TrainingJob(
        "m", "img", BENCH, 2, 8, metrics_port=8000, ckpt_claim="ckpt-rwx"
    ),
    "imex": TrainingJob("x", "img", BENCH, 2, 4, compute_domain="x-imex"),
}


def strict(schema: object) -> object:
    """``schema`` with unknown fields rejected wherever it lists the known ones."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    closed = "properties" in schema and "additionalProperties" not in schema
    if closed and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@pytest.fixture(scope="module")
def crd_validators() -> dict[str, jsonschema.Draft7Validator]:
    """One validator per custom kind, keyed ``apiVersion/kind``."""
    return {key: jsonschema.Draft7Validator(strict(crd_schema(key))) for key in CRDS}


def validate(obj: dict, crd_validators: dict) -> None:
    """Raise if ``obj`` does not fit its schema."""
    key = f"{obj['apiVersion']}/{obj['kind']}"
    if key in crd_validators:
        crd_validators[key].validate(obj)
    else:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def all_objects(job: TrainingJob) -> list[dict]:
    kinds = [k for k in k8s.RENDERERS if not (k == "volcano" and job.queue)]
    return [obj for kind in kinds for obj in k8s.RENDERERS[kind](job)]


def pod_templates(objects: list[dict]) -> list[tuple[dict, int]]:
    """Each pod template of the rendered objects with the pods made from it."""
    found = []
    for obj in objects:
        spec = obj["spec"]
        if obj["kind"] == "Job":
            found.append((spec["template"], spec["parallelism"]))
        elif obj["kind"] == "JobSet":
            for rjob in spec["replicatedJobs"]:
                js = rjob["template"]["spec"]
                found.append((js["template"], rjob["replicas"] * js["parallelism"]))
        elif obj["kind"] == "PyTorchJob":
            for replica in spec["pytorchReplicaSpecs"].values():
                found.append((replica["template"], replica["replicas"]))
    return found


@pytest.mark.parametrize("case", JOBS)
def test_every_rendered_object_fits_its_pinned_schema(case, crd_validators):
    objects = all_objects(JOBS[case])
    assert {o["kind"] for o in objects} >= {"Service", "Job", "JobSet", "PyTorchJob"}
    for obj in objects:
        validate(obj, crd_validators)


def test_volcano_gangs_the_pods_of_the_smallest_elastic_size():
    group, _, job = k8s.volcano_job(JOBS["elastic"])
    assert group["spec"]["minMember"] == JOBS["elastic"].min_nodes == 2
    template = job["spec"]["template"]
    assert template["spec"]["schedulerName"] == "volcano"
    assert template["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": group["metadata"]["name"]
    }


@pytest.mark.parametrize(
    "render, path, bad",
    [
        (k8s.plain_job, [1, "spec", "completionMod"], "Indexed"),  # misspelled field
        (k8s.plain_job, [1, "spec", "parallelism"], "2"),  # a string for an integer
        (k8s.plain_job, [0, "spec", "clusterIp"], "None"),
        (k8s.jobset, [0, "spec", "network", "enableDNSHostname"], True),
        (k8s.jobset, [0, "spec", "failurePolicy", "maxRestarts"], "3"),
        (k8s.pytorchjob, [0, "spec", "runPolicy", "backoffLimt"], 3),
        (k8s.pytorchjob, [0, "spec", "nprocPerNode"], 8),  # v1 wants a string
    ],
)
def test_a_broken_object_fails_validation(render, path, bad, crd_validators):
    objects = copy.deepcopy(render(JOBS["2x8"]))
    *parents, leaf = path
    node = objects
    for key in parents:
        node = node[key]
    node[leaf] = bad
    with pytest.raises(jsonschema.ValidationError):
        validate(objects[path[0]], crd_validators)


@pytest.mark.parametrize("case", ["2x8", "1x4"])  # 1x4: G below the node's 8
def test_each_pod_lands_alone_on_its_node_with_its_gpus(case):
    job = JOBS[case]
    for template, _ in pod_templates(all_objects(job)):
        spec = template["spec"]
        (term,) = spec["affinity"]["podAntiAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        labels = term["labelSelector"]["matchLabels"]
        assert labels.items() <= template["metadata"]["labels"].items()  # its own
        (container,) = spec["containers"]
        args, g = container["args"], job.gpus_per_node
        assert container["resources"]["limits"]["nvidia.com/gpu"] == g
        assert args[args.index("--nproc-per-node") + 1] == str(g)
        (shm,) = [v for v in spec["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["medium"] == "Memory"
        # what aiinfra.cloud.train requires before it allows restarts
        assert {"name": RESTART_ENV, "value": "1"} in container["env"]


@pytest.mark.parametrize("case", JOBS)
def test_each_kind_starts_one_pod_per_node(case):
    job = JOBS[case]
    for kind, render in k8s.RENDERERS.items():
        if kind == "volcano" and job.queue:
            continue
        assert sum(n for _, n in pod_templates(render(job))) == job.nodes, kind


def endpoint(template: dict) -> str:
    args = template["spec"]["containers"][0]["args"]
    return args[args.index("--rdzv-endpoint") + 1]


def test_rendezvous_is_pod_zero_by_each_controllers_naming():
    job = JOBS["2x8"]
    service, batch = k8s.plain_job(job)
    # Indexed Job pod i: hostname <job>-<i>, under the subdomain of the Service.
    assert batch["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]
    head = f"{batch['metadata']['name']}-0.{service['metadata']['name']}:29400"
    assert endpoint(batch["spec"]["template"]) == head
    # JobSet: <jobset>-<replicatedJob>-<job index>-<pod index>.<jobset>.
    (js,) = k8s.jobset(job)
    rjob = js["spec"]["replicatedJobs"][0]
    head = f"train-{rjob['name']}-0-0.train:29400"
    assert endpoint(rjob["template"]["spec"]["template"]) == head
    # Training operator: a Service per replica; elastic jobs rendezvous at worker 0
    # (pkg/controller.v1/pytorch/elastic.go, v1.9.0: "%s-worker-0").
    (pt,) = k8s.pytorchjob(job)
    assert set(pt["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    for t, _ in pod_templates([pt]):
        assert endpoint(t) == "train-master-0:29400"
    (el,) = k8s.pytorchjob(JOBS["elastic"])
    assert set(el["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    policy = el["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (2, 4)
    assert endpoint(pod_templates([el])[0][0]) == "el-worker-0:29400"


def test_torchrun_args_are_the_books_command_with_the_elastic_range():
    text = (ROOT / "docs/overview/running.rst").read_text()
    book = re.search(r"\$ torchrun (.*?)\n\n", text, re.S)[1].replace("\\\n", " ")
    book_args = book.replace('"', "").split()
    args = list(JOBS["2x8"].torchrun_args())
    for flag in ("--nnodes", "--nproc-per-node", "--rdzv-backend"):
        assert args[args.index(flag) + 1] == book_args[book_args.index(flag) + 1]
    # the book's $HEAD is pod 0 here; the port is the same
    port = args[args.index("--rdzv-endpoint") + 1].rsplit(":", 1)[1]
    assert book_args[book_args.index("--rdzv-endpoint") + 1] == f"$HEAD:{port}"
    assert args[-len(BENCH) :] == book_args[-len(BENCH) :] == list(BENCH)
    elastic = JOBS["elastic"].torchrun_args()
    assert elastic[elastic.index("--nnodes") + 1] == "2:4"


def test_kueue_gets_a_suspended_labelled_object_and_nothing_without_a_queue():
    queued, free = JOBS["queued"], JOBS["2x8"]
    for render, suspend in [
        (k8s.plain_job, lambda o: o["spec"].get("suspend")),
        (k8s.jobset, lambda o: o["spec"].get("suspend")),
        (k8s.pytorchjob, lambda o: o["spec"]["runPolicy"].get("suspend")),
    ]:
        top = render(queued)[-1]
        assert top["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
        assert suspend(top) is True
        assert top["metadata"]["namespace"] == "ml"
        top = render(free)[-1]
        assert "kueue.x-k8s.io/queue-name" not in top["metadata"]["labels"]
        assert not suspend(top)
    with pytest.raises(ValueError, match="queue must be None"):
        k8s.volcano_job(queued)


def test_rendering_is_deterministic():
    again = TrainingJob("train", "ghcr.io/aiinfra/train:0.1.0", list(BENCH), 2, 8)
    for render in k8s.RENDERERS.values():
        text = k8s.to_yaml(render(JOBS["2x8"]))
        assert text == k8s.to_yaml(render(again))
        assert list(yaml.safe_load_all(text)) == render(JOBS["2x8"])


BAD = [
    ({"nodes": 0}, "nodes must be >= 1, got 0"),
    ({"gpus_per_node": 16}, r"gpus_per_node must be <= node_gpus \(8\), got 16"),
    ({"min_nodes": 4, "max_nodes": 2}, r"min_nodes must be in 1..nodes \(2\), got 4"),
    ({"max_nodes": 1}, r"max_nodes must be >= nodes \(2\), got 1"),
    ({"name": "Train_1"}, "name must be a DNS-1035 label"),
    ({"name": "a" * 60}, "name must be <= 54 chars"),
    ({"image": ""}, "image must be a non-empty"),
    ({"rdzv_port": 70000}, "rdzv_port must be in 1..65535"),
    ({"queue": "Team A"}, "queue must be a DNS-1123 label"),
    ({"shm_size": "256Gi"}, r"shm_size must be <= memory \(128Gi\)"),
    ({"memory": "64GB"}, "memory must be a positive memory quantity"),
    ({"gpu_resource": "gpu"}, "gpu_resource must be a domain-qualified"),
    ({"rdma_resource": "rdma_shared_device_a"}, "rdma_resource must be a domain"),
    ({"rdma_network": "RDMA net"}, "rdma_network must be a DNS-1123 label"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_a_job_no_cluster_can_run_is_refused(change, message):
    kwargs = {"name": "t", "image": "i", "command": BENCH, "nodes": 2}
    with pytest.raises(ValueError, match=message):
        TrainingJob(**{"gpus_per_node": 8, **kwargs, **change})


def test_a_string_command_is_a_type_error():
    with pytest.raises(TypeError, match="command must be a sequence"):
        TrainingJob("t", "i", "python train.py", 1, 1)


def render(argv: list[str], monkeypatch) -> int:
    """``aiinfra k8s render`` through the real entry point (exit codes, messages)."""
    try:
        return aiinfra.cli.main(["k8s", "render", *argv])
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--nodes", "0"], "--nodes: must be an int >= 1, got '0'"),
        (["--gpus-per-node", "16"], "--gpus-per-node must be <= node_gpus (8)"),
        (["--min-nodes", "4", "--max-nodes", "2"], "--min-nodes must be in 1..nodes"),
        (["--name", "Bad_Name"], "--name must be a DNS-1035 label"),
        (["--kind", "volcano", "--queue", "q"], "queue must be None"),
        (["--kind", "trainjob"], "--metrics-port must be None for a TrainJob"),
        (["--compute-domain", "Bad_Name"], "--compute-domain must be a DNS-1123"),
    ],
)
def test_cli_refuses_bad_flags_with_status_2_and_writes_nothing(
    argv, message, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    assert render([*argv, "--out", str(out)], monkeypatch) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_deploy_files_are_what_the_cli_renders_now(tmp_path, monkeypatch):
    deploy = ROOT / "deploy/k8s"
    assert render(["--out", str(tmp_path)], monkeypatch) == 0
    assert render(["--kind", "jobset", "--rdma", "--out", str(tmp_path)], None) == 0
    tas = ["--queue", "team-a", "--topology-level", "cloud.provider.com/topology-rack"]
    assert render(["--kind", "jobset", *tas, "--out", str(tmp_path)], None) == 0
    imex = ["--compute-domain", k8s.REFERENCE_COMPUTE_DOMAIN]
    assert render(["--kind", "jobset", *imex, "--out", str(tmp_path)], None) == 0
    train = ["--kind", "trainjob", "--metrics-port", "0"]
    assert render([*train, "--out", str(tmp_path)], None) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(p.name for p in deploy.iterdir())
    assert written == [
        "job.yaml",
        "jobset-imex.yaml",
        "jobset-rdma.yaml",
        "jobset-tas.yaml",
        "jobset.yaml",
        "pytorchjob.yaml",
        "trainjob.yaml",
    ]
    for name in written:
        assert (deploy / name).read_text() == (tmp_path / name).read_text(), name


def test_cli_prints_the_manifests_without_out(monkeypatch, capsys):
    assert render(["--kind", "jobset", "--", "-m", "train"], monkeypatch) == 0
    ((template, _),) = pod_templates(list(yaml.safe_load_all(capsys.readouterr().out)))
    assert template["spec"]["containers"][0]["args"][-2:] == ["-m", "train"]


# What the NVIDIA Network Operator's RDMA shared device examples give a pod (its
# "Deploy ... with RDMA Shared Device" pages): the device plugin's resource, the
# IPC_LOCK capability and the Multus annotation naming the secondary network.
RDMA_RESOURCE = "rdma/rdma_shared_device_a"
MULTUS = "k8s.v1.cni.cncf.io/networks"


def test_the_rdma_variant_gives_every_pod_the_nics_and_nccl_the_verbs():
    job = JOBS["rdma"]
    objects = all_objects(job)
    for template, _ in pod_templates(objects):
        assert template["metadata"]["annotations"][MULTUS] == "ib-a"
        (container,) = template["spec"]["containers"]
        assert container["resources"]["limits"][RDMA_RESOURCE] == 1
        assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
        assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
        env = {e["name"]: e["value"] for e in container["env"]}
        # verbs or an error (NCCL_NET), on the mlx5 HCAs, bootstrap on eth0
        assert env["NCCL_NET"] == "IB"
        assert env["NCCL_IB_HCA"] == "mlx5"
        assert env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert env[RESTART_ENV] == "1"
    # and none of it without --rdma
    for template, _ in pod_templates(all_objects(JOBS["2x8"])):
        (container,) = template["spec"]["containers"]
        assert MULTUS not in template["metadata"].get("annotations", {})
        assert "securityContext" not in container
        assert RDMA_RESOURCE not in container["resources"]["limits"]
        assert not any(e["name"].startswith("NCCL_") for e in container["env"])


def test_volcano_keeps_the_multus_annotation_beside_its_group():
    job = TrainingJob("r", "img", BENCH, 2, 8, rdma=True)
    _, _, batch = k8s.volcano_job(job)
    annotations = batch["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {MULTUS: "rdma-net", "scheduling.k8s.io/group-name": "r"}


@pytest.mark.parametrize("render", [k8s.plain_job, k8s.jobset, k8s.pytorchjob])
def test_a_broken_rdma_pod_fails_validation(render, crd_validators):
    objects = copy.deepcopy(render(JOBS["rdma"]))
    top = objects[-1]
    for template, _ in pod_templates([top]):
        (container,) = template["spec"]["containers"]
        container["securityContext"]["capabilities"]["add"] = "IPC_LOCK"  # not a list
    with pytest.raises(jsonschema.ValidationError):
        validate(top, crd_validators)


# Kueue's Configuration fields of waitForPodsReady, as its "Sequential Admission
# with Ready Pods" task page lists them (kueue.sigs.k8s.io/docs/tasks/manage/).
KUEUE_FIELDS = {"enable", "timeout", "blockAdmission", "requeuingStrategy"}
REQUEUING_FIELDS = {"timestamp", "backoffLimitCount"}


def test_kueue_configuration_waits_for_pods_ready_with_the_documented_fields():
    config = kueue.kueue_configuration()
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta1"
    assert config["kind"] == "Configuration"
    ready = config["waitForPodsReady"]
    assert set(ready) == KUEUE_FIELDS
    assert set(ready["requeuingStrategy"]) == REQUEUING_FIELDS
    assert ready["enable"] is True and ready["blockAdmission"] is True
    assert ready["timeout"] == "10m"
    assert ready["requeuingStrategy"]["timestamp"] in ("Eviction", "Creation")
    text = (ROOT / "deploy/kueue/config.yaml").read_text()
    assert list(yaml.safe_load_all(text)) == [config]


def test_deploy_kueue_file_is_what_the_cli_renders_now(tmp_path):
    assert render(["--out", str(tmp_path)], None) == 0  # render's own files
    assert aiinfra.cli.main(["k8s", "kueue", "--out", str(tmp_path)]) == 0
    written = (tmp_path / "config.yaml").read_text()
    assert written == (ROOT / "deploy/kueue/config.yaml").read_text()


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"timeout": "10 minutes"}, ValueError, "timeout must be a positive duration"),
        ({"timeout": "0s"}, ValueError, "timeout must be a positive duration"),
        ({"timestamp": "Admission"}, ValueError, "timestamp must be one of Eviction"),
        ({"backoff_limit_count": -1}, ValueError, "backoff_limit_count must be >= 0"),
        ({"backoff_limit_count": "5"}, TypeError, "backoff_limit_count must be an int"),
    ],
)
def test_a_kueue_configuration_kueue_would_reject_is_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        kueue.kueue_configuration(**kwargs)


# Kubeflow Trainer v2.3.0's torch-distributed ClusterTrainingRuntime
# (manifests/base/runtimes/torch_distributed.yaml): its JobSet's replicated job and
# the trainer container are both "node"; the torch plugin sets these variables,
# which torchrun reads as its --nnodes, --nproc-per-node, --node-rank, --master-*
# (pkg/runtime/framework/plugins/torch/torch.go, pkg/constants/constants.go).
TORCH_RUNTIME = {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"}
RUNTIME_NODE = "node"
PET_ENV = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR"}


@pytest.mark.parametrize("case", ["2x8", "1x4", "queued", "rdma", "tas"])
def test_the_trainjob_fits_its_crd_and_names_the_torch_runtime(case, crd_validators):
    job = JOBS[case]
    (train,) = k8s.trainjob(job)
    validate(train, crd_validators)
    spec = train["spec"]
    assert spec["runtimeRef"]["name"] == TORCH_RUNTIME["name"]
    assert spec["runtimeRef"]["kind"] == TORCH_RUNTIME["kind"]
    trainer = spec["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (
        job.nodes,
        job.gpus_per_node,
    )
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == job.gpus_per_node
    # torchrun and the book's command, no rendezvous flags: the runtime sets PET_*
    assert trainer["command"] == ["torchrun", *job.command]
    assert not {e["name"] for e in trainer["env"]} & PET_ENV
    (patch,) = spec["runtimePatches"]
    (rjob,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == RUNTIME_NODE
    pod = rjob["template"]["spec"]["template"]
    assert [c["name"] for c in pod["spec"]["containers"]] == [RUNTIME_NODE]
    # the same pod as every other kind: /dev/shm in memory, one pod per node
    (shm,) = [v for v in pod["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"]["medium"] == "Memory"
    (term,) = pod["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= (
        pod["metadata"]["labels"].items()
    )
    assert spec.get("suspend") is (True if job.queue else None)


@pytest.mark.parametrize(
    "path, bad",
    [
        (["trainer", "numProcPerNode"], "8"),  # int32 in v1alpha1
        (["runtimeRef", "nam"], "torch-distributed"),
        (["trainer", "numNode"], 2),
    ],
)
def test_a_broken_trainjob_fails_validation(path, bad, crd_validators):
    (train,) = copy.deepcopy(k8s.trainjob(JOBS["2x8"]))
    *parents, leaf = path
    node = train["spec"]
    for key in parents:
        node = node[key]
    node[leaf] = bad
    with pytest.raises(jsonschema.ValidationError):
        validate(train, crd_validators)


@pytest.mark.parametrize(
    "case, message",
    [
        ("elastic", "min_nodes and max_nodes must equal nodes"),
        ("monitored", "metrics_port must be None for a TrainJob"),
        ("imex", "compute_domain must be None for a TrainJob"),
    ],
)
def test_a_trainjob_the_runtime_cannot_run_is_refused(case, message):
    with pytest.raises(ValueError, match=message):
        k8s.trainjob(JOBS[case])


# Kubernetes API reference, PodSpec.resourceClaims (PodResourceClaim: name, and one
# of resourceClaimName / resourceClaimTemplateName) and ResourceRequirements.claims
# (ResourceClaim: name, "must match the name of one entry in pod.spec.resourceClaims").


def test_every_pod_claims_the_compute_domains_channel(crd_validators):
    job = JOBS["imex"]
    for kind, render in k8s.RENDERERS.items():
        objects = render(job)
        domain = objects[0]
        assert (domain["kind"], domain["apiVersion"]) == (
            "ComputeDomain",
            "resource.nvidia.com/v1beta1",
        ), kind
        validate(domain, crd_validators)
        template_name = domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
        for template, _ in pod_templates(objects):
            spec = template["spec"]
            (claim,) = spec["resourceClaims"]
            assert set(claim) == {"name", "resourceClaimTemplateName"}
            assert claim["resourceClaimTemplateName"] == template_name
            (container,) = spec["containers"]
            assert container["resources"]["claims"] == [{"name": claim["name"]}]
            # and the GPUs are still the device plugin's count, beside the claim
            assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
            # the pod, as a batch/v1 Job's, fits the Kubernetes schema of DRA's GA
            wrapped = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "x"},
                "spec": {"template": template},
            }
            kubernetes_validate.validate(wrapped, DRA_KUBERNETES_VERSION, strict=True)
    # none of it without a ComputeDomain
    for template, _ in pod_templates(all_objects(JOBS["2x8"])):
        assert "resourceClaims" not in template["spec"]
        assert "claims" not in template["spec"]["containers"][0]["resources"]


def test_a_misspelt_claim_fails_the_kubernetes_schema():
    objects = copy.deepcopy(k8s.plain_job(JOBS["imex"]))
    template = objects[1]["spec"]["template"]
    template["spec"]["resourceClaims"][0]["resourceClaimTemplate"] = "x-imex"
    wrapped = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"}}
    wrapped["spec"] = {"template": template}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrapped, DRA_KUBERNETES_VERSION, strict=True)


def test_a_compute_domain_the_driver_would_reject_fails_its_crd(crd_validators):
    domain = k8s.RENDERERS["jobset"](JOBS["imex"])[0]
    bad = copy.deepcopy(domain)
    bad["spec"]["channel"]["allocationMode"] = "Some"  # All or Single
    with pytest.raises(jsonschema.ValidationError):
        validate(bad, crd_validators)
    bad = copy.deepcopy(domain)
    del bad["spec"]["numNodes"]  # required, even if deprecated
    with pytest.raises(jsonschema.ValidationError):
        validate(bad, crd_validators)


def test_a_compute_domain_name_must_be_a_dns_label():
    with pytest.raises(ValueError, match="compute_domain must be a DNS-1123 label"):
        TrainingJob("t", "i", BENCH, 2, 8, compute_domain="IMEX domain")
    with pytest.raises(ValueError, match="job.compute_domain must name"):
        k8s.compute_domain(JOBS["2x8"])
