"""The Ascend Volcano Job against Volcano's CRD and MindCluster's documented fields."""

import jsonschema
import pytest
from aiinfra.cloud import ascend
from aiinfra.cloud.crds import crd_schema, crd_source

from .test_manifests import strict

KEY = "batch.volcano.sh/v1alpha1/Job"


def job(**kw):
    args = {"name": "llama", "image": "img:1", "command": ["python", "-m", "x"]}
    return ascend.volcano_ascend_job(**(args | {"nodes": 2} | kw))


def test_fits_volcanos_crd():
    assert "v1.15.1" in crd_source(KEY)
    jsonschema.Draft7Validator(strict(crd_schema(KEY))).validate(job())


def test_mindcluster_fields():
    spec = job(nodes=4, npus_per_node=8)["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == spec["tasks"][0]["replicas"] == 4
    pod = spec["tasks"][0]["template"]
    res = pod["spec"]["containers"][0]["resources"]
    assert res["requests"] == res["limits"] == {"huawei.com/Ascend910": 8}
    assert pod["metadata"]["labels"] == {"ring-controller.atlas": "ascend-910b"}
    assert pod["spec"]["nodeSelector"] == {"accelerator-type": "module-910b-8"}


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"nodes": 0}, "nodes"),
        ({"npus_per_node": 9}, "npus_per_node"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        job(**kw)


def test_dcgm_names_are_the_dashboards():
    # Every DCGM field named beside an npu-exporter metric is one the monitoring
    # page's metrics module knows.
    from aiinfra.cloud import metrics

    source = open(metrics.__file__, encoding="utf-8").read()
    for npu_name, dcgm in ascend.EXPORTER_METRICS.values():
        assert npu_name.startswith("npu_chip_info_")
        assert dcgm == "-" or dcgm in source
