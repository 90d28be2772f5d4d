"""Grafana dashboard: a panel for every exported metric, valid PromQL, no overlaps."""

import itertools
import json

import promql_parser
import pytest
from aiinfra.cloud.dashboard import grafana_dashboard
from aiinfra.cloud.metrics import DCGM_METRICS, TRAINING_METRICS

# What Grafana substitutes before a query reaches Prometheus.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$job": "aiinfra-training"}


def _interpolate(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def _metric_names(expr: str) -> set:
    """The metric names ``expr`` selects, once Grafana has interpolated it."""
    names = set()

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        return True

    promql_parser.walk(promql_parser.parse(_interpolate(expr)), visit)
    return names


@pytest.fixture(scope="module")
def panels() -> list[dict]:
    return grafana_dashboard()["panels"]


def test_every_panel_expr_parses_and_uses_the_datasource_variable(panels):
    for panel in panels:
        assert panel["type"] == "timeseries"
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert _metric_names(target["expr"]), panel["title"]
            assert target["datasource"]["uid"] == "${datasource}"


def test_every_exported_metric_has_its_panel(panels):
    shown = {
        name for p in panels for t in p["targets"] for name in _metric_names(t["expr"])
    }
    exported = {m.samples[0] for m in TRAINING_METRICS} | set(DCGM_METRICS)
    assert shown == exported  # no metric left out, and nothing nobody exports
    assert [p["title"] for p in panels] == [m.name for m in TRAINING_METRICS] + list(
        DCGM_METRICS
    )


def test_training_queries_are_scoped_to_the_job_variable(panels):
    for panel in panels[: len(TRAINING_METRICS)]:
        for target in panel["targets"]:
            assert 'job="$job"' in target["expr"], panel["title"]


def test_grid_positions_do_not_overlap_and_fit_24_columns(panels):
    boxes = [p["gridPos"] for p in panels]
    for box in boxes:
        assert 0 <= box["x"] and box["x"] + box["w"] <= 24 and box["h"] > 0
    for a, b in itertools.combinations(boxes, 2):
        apart_x = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
        apart_y = a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]
        assert apart_x or apart_y, (a, b)
    assert len({p["id"] for p in panels}) == len(panels)


def test_dashboard_round_trips_json():
    dashboard = grafana_dashboard("LLM run")
    assert json.loads(json.dumps(dashboard)) == dashboard
    assert dashboard["schemaVersion"] == 39 and dashboard["title"] == "LLM run"
    variables = {v["name"]: v["type"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource": "datasource", "job": "query"}


def test_empty_title_is_rejected():
    with pytest.raises(ValueError, match="title must be non-empty"):
        grafana_dashboard(" ")
