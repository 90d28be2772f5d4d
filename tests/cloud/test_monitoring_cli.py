"""``aiinfra k8s monitoring``: deploy/monitoring holds what it renders."""

from __future__ import annotations

import json
import pathlib

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
