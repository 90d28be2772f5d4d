"""Alert rules: PromQL that parses, reads only exported metrics, in a valid file."""

import copy
from datetime import timedelta

import promql_parser
import pytest
import yaml
from aiinfra.cloud.alerts import alert_rules, check_rule_file, rule_file_yaml
from aiinfra.cloud.metrics import DCGM_METRICS, TRAINING_METRICS

# Every series a rule may read: the training exporter's samples as a scrape shows
# them (test_metrics checks those names against a real scrape), DCGM's fields, and
# the ``up`` Prometheus adds to every target.
EXPORTED = {s for m in TRAINING_METRICS for s in m.samples} | set(DCGM_METRICS) | {"up"}


def _rules(doc: dict) -> list[dict]:
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _selectors(expr: str) -> list:
    """Every vector selector of ``expr``, inside range selectors too."""
    found = []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def _unknown_metrics(expr: str) -> set:
    return {s.name for s in _selectors(expr)} - EXPORTED


def test_every_expr_parses_and_reads_only_exported_metrics():
    for rule in _rules(alert_rules()):
        assert _selectors(rule["expr"]), rule["alert"]  # parses, reads something
        assert _unknown_metrics(rule["expr"]) == set(), rule["alert"]


def test_the_metric_check_catches_a_misspelt_metric():
    assert _unknown_metrics("train_step_second > 1") == {"train_step_second"}
    assert _unknown_metrics('{__name__="up"} == 0') == {None}  # unnamed: rejected


def test_a_broken_expr_fails_the_parse():
    expr = _rules(alert_rules())[0]["expr"]
    promql_parser.parse(expr)
    for broken in (f"rate({expr}", f"{expr} >", "rate(train_steps_total)"):
        with pytest.raises(ValueError):
            promql_parser.parse(broken)


def test_training_selectors_are_scoped_to_the_job():
    for rule in _rules(alert_rules(job="llm-7b")):
        for sel in _selectors(rule["expr"]):
            if sel.name.startswith("train_") or rule["alert"] == "TrainingTargetDown":
                labels = {(m.name, m.value) for m in sel.matchers.matchers}
                assert ("job", "llm-7b") in labels, rule["alert"]


def test_stall_window_is_the_stall_minutes():
    (rule,) = [
        r for r in _rules(alert_rules(stall_minutes=7)) if "Stalled" in r["alert"]
    ]
    ranges = []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.MatrixSelector):
            ranges.append((node.vector_selector.name, node.range))
        return True

    promql_parser.walk(promql_parser.parse(rule["expr"]), visit)
    assert ranges == [("train_steps_total", timedelta(minutes=7))]


def test_rule_file_has_prometheus_structure_and_round_trips_yaml():
    doc = alert_rules()
    check_rule_file(doc)
    assert yaml.safe_load(rule_file_yaml(doc)) == doc
    for rule in _rules(doc):
        promql_parser.parse_duration(rule["for"])  # Prometheus's duration syntax
    alerts = [rule["alert"] for rule in _rules(doc)]
    assert len(set(alerts)) == len(alerts)


def _break(path: tuple, value: object):
    """A copy of the rule file with ``value`` at ``path`` (None deletes the key)."""
    doc = copy.deepcopy(alert_rules())
    *head, last = path
    node = doc
    for key in head:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("groups",), [], "non-empty 'groups'"),
        (("groups", 1, "name"), "gpu-hardware", "distinct"),
        (("groups", 0, "rules"), [], "non-empty 'rules'"),
        (("groups", 0, "rules", 0, "expr"), None, "'expr'"),
        (("groups", 0, "rules", 0, "alert"), "", "'alert'"),
        (("groups", 0, "rules", 0, "for"), "5 minutes", "'for'"),
        (("groups", 0, "rules", 0, "labels", "severity"), "page", "severity"),
        (("groups", 0, "rules", 0, "labels", "bad-name"), "x", "bad labels"),
        (("groups", 0, "rules", 0, "record"), "x", "unknown keys"),
    ],
)
def test_structural_check_rejects_a_broken_rule_file(path, value, match):
    with pytest.raises(ValueError, match=match):
        check_rule_file(_break(path, value))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(job=""), "job must be"),
        (dict(dcgm_job='a"b'), "dcgm_job must be"),
        (dict(gpus_per_node=0), "gpus_per_node must be >= 1"),
        (dict(stall_minutes=0), "stall_minutes must be >= 1"),
        (dict(slowdown=1.0), "slowdown must be > 1"),
    ],
)
def test_bad_argument_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        alert_rules(**kwargs)


def _xid_codes(expr: str) -> set[int]:
    """The XID values an expr compares ``DCGM_FI_DEV_XID_ERRORS`` with."""
    import re

    return {int(x) for x in re.findall(r"DCGM_FI_DEV_XID_ERRORS == (\d+)", expr)}


def test_xid_alerts_fire_on_a_change_per_class_not_on_a_nonzero_gauge():
    from aiinfra.cloud.alerts import XID_CLASSES

    rules = {r["alert"]: r for r in _rules(alert_rules())}
    assert "GpuXidError" not in rules  # "!= 0" kept firing on the last XID for ever
    for c in XID_CLASSES:
        rule = rules[f"GpuXid{c.name}"]
        assert _xid_codes(rule["expr"]) == set(c.xids)
        assert "changes(DCGM_FI_DEV_XID_ERRORS[" in rule["expr"]
        assert "!= 0" not in rule["expr"]
        assert rule["labels"]["severity"] == c.severity
    # NVIDIA's XID catalog: 13, 31, 43, 45 are usually the application's fault and
    # warn; 48 (double-bit ECC), 74 (NVLink) and 79 (off the bus) are hardware.
    by_code = {x: c for c in XID_CLASSES for x in c.xids}
    assert {by_code[x].severity for x in (13, 31, 43, 45)} == {"warning"}
    assert {by_code[x].severity for x in (48, 74, 79)} == {"critical"}
    assert len(by_code) == sum(len(c.xids) for c in XID_CLASSES)  # no code twice
