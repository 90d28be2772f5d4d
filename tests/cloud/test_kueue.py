"""Kueue's topology-aware scheduling: the fabric, the quota and the job's request.

Ground truths: Kueue v0.19.2's CRDs (``config/components/crd/bases/``, the
``v1beta2`` served and stored versions) and its API constants
(``apis/kueue/v1beta1/topology_types.go``: the pod-set annotations), copied here as
literals so that a typo in the package fails.
"""

from __future__ import annotations

import jsonschema
import pytest
from aiinfra.cloud.crds import crd_schema
from aiinfra.cloud.job import TrainingJob
from aiinfra.cloud.kueue import TOPOLOGY_LEVELS, tas_objects
from aiinfra.cloud.manifests import RENDERERS

from tests.cloud.test_manifests import pod_templates, strict

# apis/kueue/v1beta1/topology_types.go at v0.19.2
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
RACK = "cloud.provider.com/topology-rack"


def _job(**changes) -> TrainingJob:
    fields = {"queue": "team-a", "namespace": "ml", "topology_level": RACK}
    return TrainingJob("tas", "img:1", ("-m", "x"), 2, 8, **{**fields, **changes})


def _validate(obj: dict) -> None:
    key = f"{obj['apiVersion']}/{obj['kind']}"
    jsonschema.Draft7Validator(strict(crd_schema(key))).validate(obj)


def test_the_tas_objects_fit_kueues_crds():
    objects = tas_objects(_job(), quota_nodes=4)
    assert [o["kind"] for o in objects] == [
        "Topology",
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
    ]
    for obj in objects:
        _validate(obj)
    broken = tas_objects(_job(), quota_nodes=4)[1]
    broken["spec"]["topology"] = broken["spec"].pop("topologyName")  # a wrong field
    with pytest.raises(jsonschema.ValidationError, match="topology"):
        _validate(broken)


def test_the_objects_reference_each_other_and_the_jobs_queue():
    job = _job()
    topology, flavor, cluster_queue, local_queue = tas_objects(job, quota_nodes=4)
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]
    assert job.topology_level in levels and levels[-1] == "kubernetes.io/hostname"
    (group,) = cluster_queue["spec"]["resourceGroups"]
    (flavor_quota,) = group["flavors"]
    assert flavor_quota["name"] == flavor["metadata"]["name"]
    quota = {r["name"]: r["nominalQuota"] for r in flavor_quota["resources"]}
    assert quota == {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": 32}  # 4 x pod
    assert local_queue["metadata"] == {"name": "team-a", "namespace": "ml"}
    assert local_queue["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"]


@pytest.mark.parametrize("kind", ["job", "jobset", "pytorchjob"])
@pytest.mark.parametrize(
    ("required", "annotation"), [(True, KUEUE_REQUIRED), (False, KUEUE_PREFERRED)]
)
def test_every_pod_template_asks_kueue_for_one_domain(kind, required, annotation):
    objects = RENDERERS[kind](_job(topology_required=required))
    templates = pod_templates(objects)
    assert templates
    for template, _ in templates:
        annotations = template["metadata"]["annotations"]
        assert annotations == {annotation: RACK}
    queued = [o for o in objects if "labels" in o["metadata"]]
    assert any(o["metadata"]["labels"].get("kueue.x-k8s.io/queue-name") for o in queued)


def test_without_a_level_no_annotation_is_rendered():
    for template, _ in pod_templates(RENDERERS["jobset"](_job(topology_level=None))):
        assert "annotations" not in template["metadata"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"queue": None}, "needs a queue"),
        ({"topology_level": "rack"}, "prefixed node label"),
    ],
)
def test_a_topology_request_kueue_cannot_serve_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        _job(**change)


@pytest.mark.parametrize(
    ("job", "kwargs", "message"),
    [
        (
            _job(queue="q", topology_level=None, namespace="ml"),
            {"quota_nodes": 1},
            "quota_nodes must be >= ",
        ),
        (
            _job(topology_level="example.com/zone"),
            {"quota_nodes": 4},
            "one of the topology's levels",
        ),
        (_job(), {"quota_nodes": 4, "levels": ()}, "levels must be distinct"),
    ],
)
def test_tas_objects_refuse_what_kueue_would_never_admit(job, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tas_objects(job, **kwargs)


def test_the_default_levels_go_from_block_to_host():
    assert TOPOLOGY_LEVELS[-1] == "kubernetes.io/hostname"
    assert RACK in TOPOLOGY_LEVELS
