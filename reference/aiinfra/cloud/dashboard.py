"""Grafana dashboard: one panel per metric, generated from the metric lists.

The dashboard reads the same ``TRAINING_METRICS`` and ``DCGM_METRICS`` the exporter
and the alert rules are built from, so a metric added to the list gets its panel and
none can show a series that nothing exports. Gauges are plotted as they are, counters
as per-second rates, the step-time histogram as its median and 99th percentile. The
JSON model follows Grafana's schema (version 39): ``timeseries`` panels on a
24-column grid, queries against the datasource picked in the ``${datasource}``
variable, and the training job picked in ``$job``.
"""

from __future__ import annotations

from .metrics import DCGM_METRICS, DEFAULT_JOB, TRAINING_METRICS

# Grafana's unit ids for the units of the metric lists.
GRAFANA_UNITS = {
    "seconds": "s",
    "tokens/s": "short",
    "ratio": "percentunit",
    "percent": "percent",
    "nats": "none",
    "bytes": "bytes",
    "MiB": "mbytes",
    "bytes/s": "Bps",
    "steps": "short",
    "tokens": "short",
    "errors": "short",
    "code": "none",
    "bool": "bool",
    "watts": "watt",
    "celsius": "celsius",
}
GRID_COLUMNS = 24  # the width of Grafana's dashboard grid, in its JSON model
PANEL_W, PANEL_H = GRID_COLUMNS // 2, 8  # two panels per row
RATE = "[$__rate_interval]"  # Grafana's window: at least four scrape intervals


def _queries(
    series: str, kind: str, selector: str, legend: str
) -> list[tuple[str, str]]:
    """(PromQL, legend) pairs that plot one metric of kind ``kind``.

    Args:
        series: the scraped series: a counter's ``_total``, a histogram's ``_bucket``.
        kind: ``"gauge"``, ``"counter"`` or ``"histogram"``.
        selector: label matchers, ``{job="$job"}``, or ``""``.
        legend: the legend of one series (a pod, or a node's GPU).

    Returns:
        One query and its legend per line of the panel.
    """
    if kind == "counter":
        return [(f"rate({series}{selector}{RATE})", legend)]
    if kind == "histogram":
        buckets = f"sum by (le) (rate({series}{selector}{RATE}))"
        return [
            (f"histogram_quantile({q}, {buckets})", f"p{round(100 * q)}")
            for q in (0.5, 0.99)
        ]
    return [(f"{series}{selector}", legend)]


def _panel(title: str, description: str, unit: str, queries: list) -> dict:
    """A timeseries panel (its ``gridPos`` is set by the caller)."""
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": datasource,
        "fieldConfig": {"defaults": {"unit": GRAFANA_UNITS[unit]}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [
            {
                "refId": chr(ord("A") + i),
                "expr": expr,
                "legendFormat": legend,
                "datasource": datasource,
            }
            for i, (expr, legend) in enumerate(queries)
        ],
    }


def _variables() -> list[dict]:
    """The ``datasource`` and ``job`` template variables."""
    return [
        {
            "name": "datasource",
            "type": "datasource",
            "query": "prometheus",
            "label": "Data source",
        },
        {
            "name": "job",
            "type": "query",
            "label": "Training job",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": "label_values(train_steps_total, job)",
            "current": {"text": DEFAULT_JOB, "value": DEFAULT_JOB},
            "refresh": 2,
        },
    ]


def grafana_dashboard(title: str = "Training job") -> dict:
    """The Grafana JSON model: training metrics first, then the GPUs' DCGM fields.

    Args:
        title: the dashboard's title, non-empty.

    Returns:
        A dashboard dict for Grafana's import API (``json.dumps`` it).

    Raises:
        ValueError: an empty title.
    """
    if not title.strip():
        raise ValueError("title must be non-empty")
    panels = [
        _panel(
            m.name,
            m.help,
            m.unit,
            _queries(m.samples[0], m.kind, '{job="$job"}', "{{pod}}"),
        )
        for m in TRAINING_METRICS
    ]
    panels += [
        _panel(
            name,
            f.meaning,
            f.unit,
            _queries(name, f.kind, "", "{{Hostname}} GPU {{gpu}}"),
        )
        for name, f in DCGM_METRICS.items()
    ]
    for i, panel in enumerate(panels):
        row, col = divmod(i, GRID_COLUMNS // PANEL_W)
        panel["id"] = i + 1
        panel["gridPos"] = {
            "x": col * PANEL_W,
            "y": row * PANEL_H,
            "w": PANEL_W,
            "h": PANEL_H,
        }
    return {
        "title": title,
        "uid": "aiinfra-training",
        "schemaVersion": 39,
        "editable": True,
        "tags": ["aiinfra", "training", "dcgm"],
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": _variables()},
        "annotations": {"list": []},
        "panels": panels,
    }
