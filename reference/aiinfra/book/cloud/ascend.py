"""What ``docs/cloud/ascend.rst`` shows: an Ascend job on Kubernetes, and its metrics.

The job is :func:`aiinfra.cloud.ascend.volcano_ascend_job` (checked against
Volcano's Job CRD in the tests); the metrics are
:data:`aiinfra.cloud.ascend.EXPORTER_METRICS`. Nothing ran on an NPU cluster.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from aiinfra.cloud import ascend
from aiinfra.report import Table

# Servers of the example job.
_JOB_NODES = 2


def _job() -> dict:
    return ascend.volcano_ascend_job(
        "llama", "train:1", ["python", "train.py"], _JOB_NODES
    )


def placement_figure() -> Figure:
    """The example Volcano Job's pods on Atlas servers, drawn from the manifest."""
    spec = _job()["spec"]
    task = spec["tasks"][0]
    npus = task["template"]["spec"]["containers"][0]["resources"]["limits"]
    per_pod = npus[ascend.NPU_RESOURCE]
    fig = Figure(figsize=(8, 2.8), layout="constrained")
    ax = fig.add_subplot()
    for pod in range(task["replicas"]):
        x0 = pod * (per_pod + 1.5)
        ax.add_patch(Rectangle((x0 - 0.3, -0.4), per_pod + 0.6, 1.8, fc="#eeeeee"))
        ax.text(x0 + per_pod / 2, 1.15, f"pod {pod}", ha="center", fontsize=9)
        for k in range(per_pod):
            ax.add_patch(Rectangle((x0 + k + 0.05, 0), 0.9, 0.8, fc="#9fc5e8"))
            ax.text(x0 + k + 0.5, 0.4, str(k), ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.6, task["replicas"] * (per_pod + 1.5))
    ax.set_ylim(-0.6, 1.6)
    ax.axis("off")
    ax.set_title("minAvailable pods placed together, each on a whole server")
    return fig


def metrics_table() -> Table:
    """npu-exporter's metrics beside dcgm-exporter's, by what they watch."""
    rows = [[what, npu, dcgm] for what, (npu, dcgm) in ascend.EXPORTER_METRICS.items()]
    note = (
        "npu-exporter: MindCluster's Prometheus metrics API; DCGM: the fields the "
        "monitoring page reads. -: no single DCGM field."
    )
    return Table(["watches", "npu-exporter", "dcgm-exporter"], rows, note)


def job_npus() -> int:
    """NPUs the example job requests in all."""
    task = _job()["spec"]["tasks"][0]
    limits = task["template"]["spec"]["containers"][0]["resources"]["limits"]
    return task["replicas"] * limits[ascend.NPU_RESOURCE]
