"""How Prometheus finds a training job and its GPUs: two monitors and their labels.

With the Prometheus Operator, a scrape target is declared as an object: a
``PodMonitor`` selects the training pods by label and names the container port that
serves ``/metrics``; a ``ServiceMonitor`` selects dcgm-exporter's Service. The
operator turns each into a scrape job, and the labels it gives every series decide
what an alert can select: ``job`` (the pod label named by ``jobLabel``, else
``<namespace>/<monitor>``), ``namespace``, ``pod``, ``container`` and ``endpoint``
(prometheus-operator ``pkg/prometheus/promcfg.go``). dcgm-exporter in Kubernetes
mode labels each GPU's series with the ``pod``, ``namespace`` and ``container``
that hold the GPU; Prometheus keeps those only when the scrape honours the
exporter's labels, otherwise they clash with the exporter pod's own and become
``exported_pod``, ``exported_namespace``. Joining the two on ``(namespace, pod)``
then selects exactly the job's GPUs.
"""

from __future__ import annotations

from typing import Any

from aiinfra.cloud.job import POD_LABEL, TrainingJob

Object = dict[str, Any]
MONITORING = "monitoring.coreos.com/v1"
METRICS_PORT_NAME = "metrics"  # the container port a PodMonitor names
SCRAPE_INTERVAL = "15s"
# Labels prometheus-operator gives every target of a PodMonitor (promcfg.go, v0.93.0).
POD_TARGET_LABELS = ("namespace", "container", "pod", "job", "endpoint")
# Labels dcgm-exporter adds to a GPU's series in Kubernetes mode, naming the pod
# that holds the GPU (internal/pkg/transformation/const.go; its Helm chart sets
# DCGM_EXPORTER_KUBERNETES=true).
DCGM_POD_LABELS = ("pod", "namespace", "container")
# The labels the training job's series and its GPUs' series are joined on.
JOIN_LABELS = ("namespace", "pod")
# dcgm-exporter's Helm chart: the name and selector labels of its Service.
DCGM_CHART = "dcgm-exporter"
DCGM_NAME_LABEL = "app.kubernetes.io/name"


def pod_monitor(job: TrainingJob) -> Object:
    """The ``PodMonitor`` that scrapes the job's pods on their ``metrics`` port.

    ``jobLabel`` names the pods' own label, so the series' ``job`` is the job's
    name, the same in every namespace and for every controller.
    """
    if job.metrics_port is None:
        raise ValueError(
            "job.metrics_port must be set for a PodMonitor: the pods serve no metrics"
        )
    return {
        "apiVersion": MONITORING,
        "kind": "PodMonitor",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": {POD_LABEL: job.name},
        },
        "spec": {
            "jobLabel": POD_LABEL,
            "selector": {"matchLabels": {POD_LABEL: job.name}},
            "podMetricsEndpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                }
            ],
        },
    }


def dcgm_service_monitor(
    namespace: str = "monitoring", honor_labels: bool = True
) -> Object:
    """The ``ServiceMonitor`` of dcgm-exporter's Helm chart, keeping its pod labels.

    Args:
        namespace: where the chart runs the exporter and its Service.
        honor_labels: keep the exporter's ``pod``/``namespace`` labels. The chart's
            own ServiceMonitor sets ``honorLabels: false``, which renames them to
            ``exported_pod``/``exported_namespace``; the join then matches nothing.
    """
    return {
        "apiVersion": MONITORING,
        "kind": "ServiceMonitor",
        "metadata": {"name": DCGM_CHART, "namespace": namespace},
        "spec": {
            "jobLabel": DCGM_NAME_LABEL,
            "selector": {"matchLabels": {DCGM_NAME_LABEL: DCGM_CHART}},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": METRICS_PORT_NAME,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "honorLabels": honor_labels,
                }
            ],
        },
    }


def target_job(monitor: Object, labels: dict[str, str], service: str = "") -> str:
    """The ``job`` label the operator gives a target of ``monitor``.

    Args:
        monitor: a rendered PodMonitor or ServiceMonitor.
        labels: the labels of the target's pod (PodMonitor) or Service.
        service: the Service's name (ServiceMonitor only).

    Returns:
        ``labels[jobLabel]`` when set and non-empty; else ``<namespace>/<name>``
        of a PodMonitor, the Service's name for a ServiceMonitor.
    """
    value = labels.get(monitor["spec"].get("jobLabel", ""), "")
    if value:
        return value
    if monitor["kind"] == "PodMonitor":
        meta = monitor["metadata"]
        return f"{meta['namespace']}/{meta['name']}"
    return service


def dcgm_series_labels(service_monitor: Object) -> tuple[str, ...]:
    """The names a GPU's pod labels have in Prometheus after this scrape.

    Prometheus's ``honor_labels: false`` resolves a clash between a scraped label and
    a target label by renaming the scraped one ``exported_<name>``; every target of a
    ServiceMonitor carries ``namespace``, ``pod`` and ``container`` of its own.
    """
    (endpoint,) = service_monitor["spec"]["endpoints"]
    if endpoint.get("honorLabels", False):
        return DCGM_POD_LABELS
    return tuple(f"exported_{name}" for name in DCGM_POD_LABELS)
