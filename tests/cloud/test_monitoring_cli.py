"""``aiinfra k8s monitoring``: deploy/monitoring holds what it renders."""

from __future__ import annotations

import json
import pathlib
import re

import aiinfra.cli
import pytest
from aiinfra.cloud.alerts import alert_rules, check_rule_file
from aiinfra.cloud.dashboard import grafana_dashboard

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "monitoring"


def monitoring(argv: list[str]) -> int:
    try:
        return aiinfra.cli.main(["k8s", "monitoring", *argv])
    except SystemExit as exc:
        return exc.code


def test_deploy_files_are_what_the_cli_renders_now(tmp_path):
    assert monitoring(["--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert (
        names
        == sorted(p.name for p in DEPLOY.iterdir())
        == [
            "alerts.yaml",
            "dashboard.json",
            "dcgm-counters.csv",
            "dcgm-servicemonitor.yaml",
        ]
    )
    for name in names:
        assert (tmp_path / name).read_text() == (DEPLOY / name).read_text(), name


def test_the_files_hold_the_package_s_rules_and_dashboard():
    yaml = pytest.importorskip("yaml")
    rules = yaml.safe_load((DEPLOY / "alerts.yaml").read_text())
    check_rule_file(rules)
    assert rules == alert_rules()
    assert json.loads((DEPLOY / "dashboard.json").read_text()) == grafana_dashboard()


def test_flags_reach_the_rules(capsys):
    assert monitoring(["--gpus-per-node", "4", "--stall-minutes", "3"]) == 0
    rules = capsys.readouterr().out
    assert "< 4" in rules and "[3m]" in rules


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--stall-minutes", "0"], "--stall-minutes: must be an int >= 1"),
        (["--gpus-per-node", "x"], "--gpus-per-node: must be an int >= 1"),
        (["--job", ""], "job"),
    ],
)
def test_bad_flags_exit_2_and_write_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "out"
    assert monitoring([*argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def _dcgm_fields_read() -> set[str]:
    """Every DCGM field an alert expression or a dashboard panel reads."""
    import promql_parser

    exprs = [r["expr"] for g in alert_rules()["groups"] for r in g["rules"]]
    exprs += [t["expr"] for p in grafana_dashboard()["panels"] for t in p["targets"]]
    names = set()

    def visit(node) -> bool:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            names.add(node.name)
        return True

    for expr in exprs:  # Grafana's variables replaced by values PromQL parses
        expr = re.sub(r"\$__\w+", "5m", expr)
        expr = re.sub(r"\$\{?\w+\}?", "x", expr)
        promql_parser.walk(promql_parser.parse(expr), visit)
    return {n for n in names if n.startswith("DCGM_")}


def test_every_dcgm_field_the_alerts_and_dashboard_read_is_enabled():
    # dcgm-exporter scrapes only the uncommented lines of its counters file, each
    # "field, type, help" (its etc/default-counters.csv format).
    text = (DEPLOY / "dcgm-counters.csv").read_text()
    enabled = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            fields = [f.strip() for f in line.split(",")]
            assert len(fields) == 3, line
            assert fields[1] in ("gauge", "counter"), line
            enabled[fields[0]] = fields[1]
    read = _dcgm_fields_read()
    assert {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_NVLINK_TX_BYTES"} <= read
    assert read <= set(enabled), read - set(enabled)
