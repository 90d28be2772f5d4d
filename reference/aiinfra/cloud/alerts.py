"""Alert rules: the hardware chapter's failures, as Prometheus sees them.

Each failure of a large training job leaves a signature in the metrics of
:mod:`aiinfra.cloud.metrics`. A GPU that raises an XID error shows its code in
``DCGM_FI_DEV_XID_ERRORS``; one that falls off the bus drops out of the exporter's
series; a hung NCCL collective stops the step counter while every GPU looks busy; a
straggler shows as one GPU's SM activity far below the job's median; a slow node as
a step time above the run's own median of the last hour. "The job's GPUs" are the
DCGM series whose ``pod`` and ``namespace`` (dcgm-exporter's Kubernetes labels) are
those of a pod the job's PodMonitor scrapes: :func:`job_gpus` joins them on
:data:`~aiinfra.cloud.scrape.JOIN_LABELS`. The rules are data, written
out in Prometheus's rule-file format (``groups: [{name, rules: [...]}]``), and
:func:`check_rule_file` checks the structure Prometheus requires before loading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiinfra.clikit import require

from .metrics import DEFAULT_JOB
from .scrape import JOIN_LABELS


@dataclass(frozen=True)
class XidClass:
    """XIDs that mean the same thing to an operator (NVIDIA's XID catalog).

    Attributes:
        name: the class, in the alert's name (``GpuXidApplication``).
        xids: its codes.
        meaning: what the driver reports.
        fault: whose fault it usually is.
        action: what to do.
        severity: ``"warning"`` (the job's own bug, usually) or ``"critical"``.
    """

    name: str
    xids: tuple[int, ...]
    meaning: str
    fault: str
    action: str
    severity: str


# region xid-classes
#: The XIDs a training cluster sees most, by the action each needs.
XID_CLASSES = (
    XidClass(
        "Application",
        (13, 31, 43, 45),
        "graphics engine exception, memory page fault, channel stopped, "
        "preemptive cleanup",
        "the application (a bad memory access, a killed process)",
        "read the job's own error first; the same XID on one GPU across jobs "
        "points at the hardware",
        "warning",
    ),
    XidClass(
        "Memory",
        (48, 63, 64, 92, 94, 95),
        "ECC errors: double-bit, row remapping, remap failure, high single-bit "
        "rate, contained and uncontained",
        "the HBM",
        "drain the node and reset the GPU (a remap applies at reset); replace it "
        "when a remap fails or errors recur",
        "critical",
    ),
    XidClass(
        "Nvlink",
        (74,),
        "NVLink error",
        "the link, the GPU or the NVSwitch",
        "drain the node, reset the GPU, check the link's error counters",
        "critical",
    ),
    XidClass(
        "OffTheBus",
        (79,),
        "GPU has fallen off the bus",
        "the GPU, its board or PCIe",
        "drain the node and power-cycle it; the job restarts without it",
        "critical",
    ),
    XidClass(
        "Firmware",
        (119, 120),
        "GSP timeout, GSP error",
        "the GPU's firmware or the driver",
        "reset the GPU; update the driver if it recurs",
        "critical",
    ),
)
# endregion


def xid_expr(xids: tuple[int, ...], window: str = "5m") -> str:
    """PromQL that holds while the last XID is one of ``xids`` and just changed.

    ``DCGM_FI_DEV_XID_ERRORS`` is a gauge of the *last* XID a GPU raised, so
    ``!= 0`` fires for ever after one error; ``changes`` fires when a new one
    arrives (a repeat of the same code leaves the gauge unchanged and is missed).
    """
    codes = " or ".join(f"DCGM_FI_DEV_XID_ERRORS == {x}" for x in xids)
    return f"({codes}) and changes(DCGM_FI_DEV_XID_ERRORS[{window}]) > 0"


# region job-gpus
def job_gpus(field: str, train: str) -> str:
    """PromQL of DCGM ``field`` on the GPUs of the pods ``up{train}`` selects.

    ``and on (namespace, pod)`` keeps a GPU's series only where a training target
    of the same namespace and pod exists: the GPUs the job's pods hold, and no
    other job's.
    """
    return f"({field} and on ({', '.join(JOIN_LABELS)}) up{train})"


# endregion
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
SEVERITIES = ("warning", "critical")


def _rule(
    alert: str, expr: str, for_: str, severity: str, summary: str, why: str
) -> dict:
    """One alerting rule in Prometheus's format: fire when ``expr`` holds ``for_``."""
    return {
        "alert": alert,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity},
        "annotations": {"summary": summary, "description": why},
    }


def alert_rules(
    job: str = DEFAULT_JOB,
    namespace: str = "default",
    dcgm_job: str = "dcgm-exporter",
    gpus_per_node: int = 8,
    stall_minutes: int = 10,
    slowdown: float = 1.5,
) -> dict:
    """The training job's alerting rules, as a Prometheus rule file.

    Args:
        job: the ``job`` label of the training pods' scrape target.
        namespace: the training pods' namespace.
        dcgm_job: the ``job`` label of dcgm-exporter's scrape target.
        gpus_per_node: GPUs each node should report; fewer means one fell off.
        stall_minutes: minutes without a step before the job counts as hung, >= 1.
        slowdown: step time over its 1 h median that counts as a regression, > 1.

    Returns:
        ``{"groups": [...]}``, ready for :func:`rule_file_yaml`.

    Raises:
        ValueError: an empty or quoted job name, or a threshold out of range.
    """
    for name, value in (("job", job), ("namespace", namespace), ("dcgm_job", dcgm_job)):
        if not value or '"' in value or "\\" in value:
            raise ValueError(f"{name} must be non-empty without quotes, got {value!r}")
    if gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be >= 1, got {gpus_per_node}")
    if stall_minutes < 1:
        raise ValueError(f"stall_minutes must be >= 1, got {stall_minutes}")
    if not slowdown > 1:
        raise ValueError(f"slowdown must be > 1, got {slowdown}")
    train = f'{{job="{job}", namespace="{namespace}"}}'
    dcgm = f'{{job="{dcgm_job}"}}'
    sm_active = job_gpus("DCGM_FI_PROF_SM_ACTIVE", train)
    running = f"on() (sum(rate(train_steps_total{train}[5m])) > 0)"
    gpu = "GPU {{ $labels.gpu }} on {{ $labels.Hostname }}"
    hardware = [
        *(
            _rule(
                f"GpuXid{c.name}",
                xid_expr(c.xids),
                "1m",  # changes() holds for the window after a new XID
                c.severity,
                f"{gpu} raised XID {{{{ $value }}}}",
                f"XID {', '.join(map(str, c.xids))}: {c.meaning}. Usually {c.fault}: "
                f"{c.action}.",
            )
            for c in XID_CLASSES
        ),
        _rule(
            "GpuMissing",
            f"count by (Hostname) (DCGM_FI_DEV_GPU_TEMP) < {gpus_per_node}",
            "5m",
            "critical",
            "{{ $labels.Hostname }} reports {{ $value }} GPUs",
            "A GPU that fell off the bus (XID 79) disappears from the exporter.",
        ),
        _rule(
            "DcgmExporterDown",
            f"up{dcgm} == 0 or absent(up{dcgm})",
            "5m",
            "critical",
            "dcgm-exporter on {{ $labels.instance }} is not scraped",
            "Without it no GPU alert can fire: the node is unwatched.",
        ),
        _rule(
            "NvlinkErrors",
            "increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[10m]) > 0 or "
            "increase(DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL[10m]) > 0",
            "1m",
            "warning",
            f"{gpu} has NVLink errors",
            "CRC errors and link recoveries precede a link going down; the fields "
            "are off in dcgm-exporter's default counters file and must be enabled.",
        ),
        _rule(
            "GpuRowRemapFailure",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0",
            "1m",
            "critical",
            f"{gpu} could not remap an HBM row",
            "The memory has no spare rows left: the GPU needs replacing.",
        ),
        _rule(
            "GpuMemoryNearFull",
            "DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95",
            "10m",
            "warning",
            f"{gpu} memory is over 95 % used",
            "The next longer sequence or fragmentation spike is an out-of-memory.",
        ),
    ]
    training = [
        _rule(
            "TrainingTargetDown",
            f"up{train} == 0 or absent(up{train})",
            "5m",
            "critical",
            f"The training job {job} is not scraped",
            "The pods are gone or their exporter died: the job is not running.",
        ),
        _rule(
            "TrainingStalled",
            f"increase(train_steps_total{train}[{stall_minutes}m]) == 0",
            "1m",
            "critical",
            f"{job} made no step in {stall_minutes} minutes",
            "Every rank waits in a collective that one rank never joined: the "
            "NCCL-hang signature. Dump the stacks, then restart from a checkpoint.",
        ),
        _rule(
            "StepTimeRegression",
            f"train_step_seconds{train} > {slowdown} * "
            f"quantile_over_time(0.5, train_step_seconds{train}[1h])",
            "15m",
            "warning",
            f"{job} steps are {slowdown}x slower than the hour's median",
            "A slow node, a throttled GPU or a congested link slows every rank.",
        ),
        _rule(
            "GpuStraggler",
            f"{sm_active} < 0.5 * scalar(quantile(0.5, {sm_active})) and {running}",
            "10m",
            "warning",
            f"{gpu} of pod {{{{ $labels.pod }}}} is half as busy as the job's median "
            "GPU",
            "The job's GPUs are those of its pods, joined on dcgm-exporter's pod "
            "labels (Kubernetes mode, scraped with honorLabels). Its input "
            "pipeline or its host falls behind; the others wait for it. "
            "It reads SM activity, a profiling field that both of dcgm-exporter's "
            "default counters files leave commented out: enable it (the counters "
            "file written here does), or this rule never fires.",
        ),
    ]
    return {
        "groups": [
            {"name": "gpu-hardware", "rules": hardware},
            {"name": "training-job", "rules": training},
        ]
    }


def check_rule_file(doc: dict) -> None:
    """Check the structure Prometheus requires of a rule file (not the PromQL).

    Args:
        doc: a parsed rule file.

    Raises:
        ValueError: the first structural error, with the group and rule it is in.
    """
    groups = doc.get("groups") if isinstance(doc, dict) else None
    if not isinstance(groups, list) or not groups:
        raise ValueError("a rule file needs a non-empty 'groups' list")
    names = [g.get("name") for g in groups]
    if len(set(names)) != len(names) or not all(
        isinstance(n, str) and n for n in names
    ):
        raise ValueError(f"group names must be distinct non-empty strings: {names}")
    for group in groups:
        if not isinstance(group.get("rules"), list) or not group["rules"]:
            raise ValueError(f"group {group['name']!r} needs a non-empty 'rules' list")
        for i, rule in enumerate(group["rules"]):
            where = f"group {group['name']!r} rule {i}"
            if not isinstance(rule.get("alert"), str) or not rule["alert"]:
                raise ValueError(f"{where}: 'alert' must be a non-empty string")
            if not isinstance(rule.get("expr"), str) or not rule["expr"].strip():
                raise ValueError(f"{where}: 'expr' must be a non-empty string")
            if not _DURATION.match(str(rule.get("for", "0s"))):
                raise ValueError(
                    f"{where}: 'for' must be a duration, got {rule['for']}"
                )
            for key in ("labels", "annotations"):
                for label, value in rule.get(key, {}).items():
                    if not _LABEL.match(label) or not isinstance(value, str):
                        raise ValueError(f"{where}: bad {key} entry {label!r}")
            if rule.get("labels", {}).get("severity") not in SEVERITIES:
                raise ValueError(f"{where}: severity must be one of {SEVERITIES}")
            unknown = set(rule) - {"alert", "expr", "for", "labels", "annotations"}
            if unknown:
                raise ValueError(f"{where}: unknown keys {sorted(unknown)}")


def rule_file_yaml(doc: dict) -> str:
    """``doc`` as the YAML text Prometheus loads, after :func:`check_rule_file`."""
    check_rule_file(doc)
    yaml = require("yaml", "cloud")  # PyYAML: an optional package
    return yaml.safe_dump(doc, sort_keys=False, width=88)
