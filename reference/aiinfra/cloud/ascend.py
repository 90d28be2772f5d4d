"""A training job on Ascend NPUs as MindCluster schedules it: a Volcano Job.

No NPU cluster ran this: the manifest follows MindCluster's documented examples
and is checked against the ``batch.volcano.sh/v1alpha1`` Job CRD of Volcano
v1.15.1 (:data:`aiinfra.cloud.crds.CRDS`). MindCluster's Ascend Device Plugin
advertises each NPU as the extended resource :data:`NPU_RESOURCE`, requested
with limits equal to requests; the ``ring-controller.atlas`` label tells
MindCluster's Volcano plugin the product (``ascend-910b`` for Atlas A2), and the
``accelerator-type`` node label the server (``module-910b-8``: eight NPUs). The
device plugin passes the NPUs it chose through the pod annotation of the same
name, which Ascend Docker Runtime reads as ``ASCEND_VISIBLE_DEVICES``.
"""

from __future__ import annotations

from typing import Any

from aiinfra import checks

#: The extended resource of MindCluster's Ascend Device Plugin, one per NPU.
NPU_RESOURCE = "huawei.com/Ascend910"
#: The label naming the product to MindCluster's Volcano plugin (Atlas A2).
RING_CONTROLLER = ("ring-controller.atlas", "ascend-910b")
#: The node label of an Atlas 800T A2 (8 NPUs per server).
ACCELERATOR_TYPE = ("accelerator-type", "module-910b-8")
#: NPUs of one Atlas 800T A2 server: a pod takes all of them or fewer.
NPUS_PER_SERVER = 8

Object = dict[str, Any]


def volcano_ascend_job(
    name: str, image: str, command: list[str], nodes: int, npus_per_node: int = 8
) -> Object:
    """A Volcano Job of ``nodes`` pods with ``npus_per_node`` NPUs each, gang-scheduled.

    Args:
        name: the job's name (a DNS label).
        image: the container image.
        command: the container's command.
        nodes: pods, one per server, >= 1; Volcano starts none until all fit.
        npus_per_node: NPUs per pod, 1 to :data:`NPUS_PER_SERVER`.

    Returns:
        The ``batch.volcano.sh/v1alpha1`` Job as a dict.

    Raises:
        ValueError: a count out of range or an empty name or image (TypeError for
            a wrong type).
    """
    checks.positive_int("nodes", nodes)
    checks.int_in("npus_per_node", npus_per_node, 1, NPUS_PER_SERVER)
    for arg, value in (("name", name), ("image", image)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{arg} must be a non-empty str, got {value!r}")
    # region vcjob
    npus = {NPU_RESOURCE: npus_per_node}  # requests equal to limits
    container = {
        "name": "train",
        "image": image,
        "command": list(command),
        "env": [
            {  # the NPUs the device plugin chose, for Ascend Docker Runtime
                "name": "ASCEND_VISIBLE_DEVICES",
                "valueFrom": {
                    "fieldRef": {"fieldPath": f"metadata.annotations['{NPU_RESOURCE}']"}
                },
            }
        ],
        "resources": {"requests": dict(npus), "limits": dict(npus)},
    }
    template = {
        "metadata": {"labels": dict([RING_CONTROLLER])},
        "spec": {
            "nodeSelector": dict([ACCELERATOR_TYPE]),
            "restartPolicy": "Never",
            "containers": [container],
        },
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "labels": dict([RING_CONTROLLER])},
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": nodes,  # gang: all pods or none
            "tasks": [{"name": "worker", "replicas": nodes, "template": template}],
        },
    }
    # endregion


#: What a GPU job's dashboard watches -> (npu-exporter's metric, dcgm-exporter's).
#: npu-exporter: MindCluster's Prometheus metrics API (its example output and
#: table); DCGM: the fields the monitoring page's dashboard reads.
EXPORTER_METRICS = {
    "compute busy": ("npu_chip_info_utilization", "DCGM_FI_DEV_GPU_UTIL"),
    "device memory used": ("npu_chip_info_hbm_used_memory", "DCGM_FI_DEV_FB_USED"),
    "temperature": ("npu_chip_info_temperature", "DCGM_FI_DEV_GPU_TEMP"),
    "power": ("npu_chip_info_power", "DCGM_FI_DEV_POWER_USAGE"),
    "error code": ("npu_chip_info_error_code", "DCGM_FI_DEV_XID_ERRORS"),
    "health": ("npu_chip_info_health_status", "-"),
    "network link up": ("npu_chip_info_link_status", "-"),
}
