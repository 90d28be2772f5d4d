"""Monitoring that is wired: the monitors, their labels, the alerts that read them.

The ground truths are prometheus-operator's scrape-config generator
(``pkg/prometheus/promcfg.go`` at v0.93.0: a PodMonitor's targets get ``namespace``,
``container``, ``pod``, ``endpoint`` and a ``job`` that is the ``jobLabel`` pod
label's value, else ``<namespace>/<name>``), dcgm-exporter's Kubernetes mode
(``internal/pkg/transformation/const.go``: ``pod``, ``namespace``, ``container``),
its Helm chart (``deployment/``: Service labels, ``honorLabels: false``) and
Prometheus's ``honor_labels`` rule (a clashing scraped label becomes
``exported_<name>``). The alerts are parsed with promql-parser, not read as text.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import jsonschema
import promql_parser
import pytest
from aiinfra.cloud.alerts import alert_rules
from aiinfra.cloud.crds import crd_schema
from aiinfra.cloud.job import METRICS_PORT_ENV, POD_LABEL, TrainingJob
from aiinfra.cloud.manifests import RENDERERS
from aiinfra.cloud.scrape import (
    DCGM_CHART,
    POD_TARGET_LABELS,
    dcgm_series_labels,
    dcgm_service_monitor,
    pod_monitor,
    target_job,
)
from aiinfra.distributed import run_distributed

from tests.cloud.test_manifests import pod_templates, strict

JOB = TrainingJob("llm", "img:1", ("-m", "x"), 2, 8, namespace="ml", metrics_port=8000)
# The Service of dcgm-exporter's Helm chart (deployment/templates/service.yaml and
# _helpers.tpl's selectorLabels), release "dcgm-exporter".
CHART_SERVICE = "dcgm-exporter"
CHART_LABELS = {
    "app.kubernetes.io/name": DCGM_CHART,
    "app.kubernetes.io/instance": "dcgm-exporter",
    "app.kubernetes.io/component": DCGM_CHART,
}


def _rendered() -> tuple[dict, dict]:
    """The pod template and the PodMonitor of ``JOB``'s JobSet."""
    objects = RENDERERS["jobset"](JOB)
    ((template, _),) = pod_templates(objects)
    assert objects[-1]["kind"] == "PodMonitor"
    return template, objects[-1]


def _rules() -> dict[str, str]:
    job = target_job(_rendered()[1], _rendered()[0]["metadata"]["labels"])
    doc = alert_rules(job=job, namespace=JOB.namespace)
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def _walk(expr: str) -> tuple[list, list[list[str]]]:
    """The vector selectors of ``expr`` and the label lists of its ``on (...)``."""
    selectors, joins = [], []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            selectors.append(node)
        if isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            if node.modifier.matching is not None and node.modifier.matching.labels:
                joins.append(list(node.modifier.matching.labels))
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return selectors, joins


def _matchers(selector) -> dict[str, str]:
    return {m.name: m.value for m in selector.matchers.matchers}


@pytest.mark.parametrize("kind", ["job", "jobset", "pytorchjob", "volcano"])
def test_the_pods_serve_the_port_the_pod_monitor_scrapes(kind):
    objects = RENDERERS[kind](JOB)
    monitor = objects[-1]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert monitor["metadata"]["namespace"] == JOB.namespace
    templates = pod_templates(objects)
    assert templates
    for template, _ in templates:
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports[endpoint["port"]] == JOB.metrics_port
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env[METRICS_PORT_ENV] == str(JOB.metrics_port)  # train.py serves it
        assert selector.items() <= template["metadata"]["labels"].items()


def test_monitors_fit_prometheus_operators_crds():
    for obj in (pod_monitor(JOB), dcgm_service_monitor()):
        key = f"{obj['apiVersion']}/{obj['kind']}"
        jsonschema.Draft7Validator(strict(crd_schema(key))).validate(obj)
    broken = pod_monitor(JOB)
    broken["spec"]["podMetricsEndpoints"][0]["prot"] = "metrics"  # a typo
    schema = strict(crd_schema("monitoring.coreos.com/v1/PodMonitor"))
    with pytest.raises(jsonschema.ValidationError, match="prot"):
        jsonschema.Draft7Validator(schema).validate(broken)


def test_the_job_label_is_the_pods_label_else_namespace_slash_name():
    template, monitor = _rendered()
    assert target_job(monitor, template["metadata"]["labels"]) == JOB.name
    assert target_job(monitor, {}) == f"{JOB.namespace}/{JOB.name}"
    service = dcgm_service_monitor()
    assert target_job(service, CHART_LABELS, CHART_SERVICE) == DCGM_CHART
    assert target_job(service, {}, "nvidia-dcgm-exporter") == "nvidia-dcgm-exporter"


def test_training_selectors_name_the_job_and_namespace_the_monitor_produces():
    template, monitor = _rendered()
    job = target_job(monitor, template["metadata"]["labels"])
    seen = 0
    for alert, expr in _rules().items():
        for sel in _walk(expr)[0]:
            labels = _matchers(sel)
            if sel.name.startswith("train_") or (
                sel.name == "up" and labels.get("job") != DCGM_CHART
            ):
                assert labels == {
                    "job": job,
                    "namespace": monitor["metadata"]["namespace"],
                }, alert
                seen += 1
    assert seen >= 5


def test_dcgm_exporter_down_names_the_job_its_service_monitor_produces():
    expr = _rules()["DcgmExporterDown"]
    jobs = {_matchers(s)["job"] for s in _walk(expr)[0]}
    assert jobs == {target_job(dcgm_service_monitor(), CHART_LABELS, CHART_SERVICE)}


def test_the_straggler_compares_only_the_jobs_gpus():
    selectors, joins = _walk(_rules()["GpuStraggler"])
    sm = [s for s in selectors if s.name == "DCGM_FI_PROF_SM_ACTIVE"]
    assert len(sm) == 2  # the GPU and the median it is compared with
    assert len(joins) >= 2  # both sides joined to the job's pods
    both = set(POD_TARGET_LABELS) & set(dcgm_series_labels(dcgm_service_monitor()))
    for labels in joins:
        if labels:  # and on () (the job runs) has no labels
            assert set(labels) <= both, labels
            assert {"namespace", "pod"} <= set(labels)  # pod names are per namespace


def test_with_the_charts_honor_labels_false_the_join_matches_nothing():
    chart_default = dcgm_service_monitor(honor_labels=False)
    assert dcgm_series_labels(chart_default) == (
        "exported_pod",
        "exported_namespace",
        "exported_container",
    )
    _, joins = _walk(_rules()["GpuStraggler"])
    labels = {label for j in joins for label in j}
    assert not labels <= set(dcgm_series_labels(chart_default))


def test_a_job_without_metrics_gets_no_pod_monitor():
    bare = TrainingJob("bare", "img", ("-m", "x"), 2, 8)
    for kind in ("job", "jobset", "pytorchjob"):
        assert all(o["kind"] != "PodMonitor" for o in RENDERERS[kind](bare))
    with pytest.raises(ValueError, match="metrics_port"):
        pod_monitor(bare)


@pytest.mark.parametrize("port", [0, 70000, 29400])
def test_a_metrics_port_no_pod_can_serve_is_refused(port):
    with pytest.raises(ValueError, match="metrics_port must be in 1..65535"):
        TrainingJob("j", "img", ("-m", "x"), 2, 8, metrics_port=port)


def test_a_pod_label_names_the_job_in_the_monitor():
    assert pod_monitor(JOB)["spec"]["jobLabel"] == POD_LABEL


def _train_and_scrape(root: str, steps: int) -> dict:
    """On each rank: train; local rank 0 serves its metrics and scrapes them."""
    import torch.distributed as dist
    from aiinfra.cloud.metrics import TrainingExporter
    from aiinfra.cloud.train import ElasticEnv, TrainConfig, check_config, train
    from prometheus_client.parser import text_string_to_metric_families

    rank, world = dist.get_rank(), dist.get_world_size()
    env = ElasticEnv(rank, world, rank, 0, local_world_size=world)  # one pod
    config = TrainConfig(steps, 2, root, metrics_port=0, peak_flops=1e12)
    check_config(config, world)
    exporter = TrainingExporter("cpu") if env.local_rank == 0 else None
    port = exporter.start(0) if exporter else None
    try:
        record = train(config, env, exporter)
        if exporter is None:
            return {"record": record}
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    finally:
        if exporter is not None:
            exporter.close()
    samples = {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if not s.labels
    }
    return {"record": record, "samples": samples}


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_entry_point_serves_each_steps_metrics(tmp_path):
    from aiinfra.cloud.train import BATCH

    steps = 4
    out = run_distributed(_train_and_scrape, 2, str(Path(tmp_path)), steps)
    samples, record = out[0]["samples"], out[0]["record"]
    assert "samples" not in out[1]  # one exporter per pod: local rank 0's
    assert samples["train_steps_total"] == steps
    assert samples["train_tokens_total"] == steps * BATCH  # the pod's 2 ranks' share
    assert samples["train_loss"] == record["final_loss"]  # the all-reduced loss
    assert samples["train_step_duration_seconds_count"] == steps
    assert samples["train_step_seconds"] > 0
