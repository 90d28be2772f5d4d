"""What ``docs/cloud/monitoring.rst`` shows: the metrics, alerts and dashboard of a job.

The metric lists of :mod:`aiinfra.cloud.metrics`, the alert rules and the dashboard
that ``aiinfra k8s monitoring`` writes, and a scrape measured at build time: a tiny
model trains on the CPU, a ``TrainingExporter`` observes each step, and the page
sets an HTTP scrape of it beside the loop's own measurements.
"""

from __future__ import annotations

import inspect
import resource
import time
import urllib.request
from dataclasses import dataclass
from functools import cache

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator
from prometheus_client.parser import text_string_to_metric_families
from torch import nn

from aiinfra import results
from aiinfra.cloud import dashboard, scrape
from aiinfra.cloud.alerts import XID_CLASSES, alert_rules
from aiinfra.cloud.cli import (
    CKPT_CLAIM,
    METRICS_PORT,
    REFERENCE_COMMAND,
    REFERENCE_IMAGE,
)
from aiinfra.cloud.dashboard import grafana_dashboard
from aiinfra.cloud.job import REFERENCE_NAME, TrainingJob
from aiinfra.cloud.manifests import CONTAINER, RENDERERS
from aiinfra.cloud.metrics import DCGM_METRICS, TRAINING_METRICS, TrainingExporter
from aiinfra.report import Table

__all__ = [
    "GRAFANA_COLUMNS",
    "NOMINAL_PEAK_FLOPS",
    "SCRAPE_STEPS",
    "alert_count",
    "alerts_table",
    "dashboard_figure",
    "dashboard_panel_count",
    "dcgm_table",
    "join_figure",
    "scrape_figure",
    "scrape_table",
    "stall_minutes",
    "training_metrics_table",
]

#: Optimizer steps of the build-time run that the exporter observes.
SCRAPE_STEPS = 20
#: The peak FLOP/s the run's MFU is computed against: a round number, since a
#: CPU has no datasheet tensor peak; the scrape checks the arithmetic, not the CPU.
NOMINAL_PEAK_FLOPS = 1e12
_VOCAB, _DIM, _BATCH, _SEQ, _SEED = 128, 64, 8, 33, 0
_LR = 0.5  # plain SGD: torch.optim would import torch._dynamo, a second of start-up
_TOKENS = _BATCH * (_SEQ - 1)  # next-token targets per step


def dcgm_table() -> Table:
    """The dcgm-exporter fields the package watches: type, unit, default, meaning."""
    rows = [
        [name, f.kind, f.unit, "enabled" if f.default else "to add", f.meaning]
        for name, f in DCGM_METRICS.items()
    ]
    note = (
        "DCGM field names as dcgm-exporter serves them. Default counters file: "
        "whether dcgm-exporter's etc/default-counters.csv enables the field, or it "
        "must be added to the counters file that the exporter is started with."
    )
    columns = ["field", "type", "unit", "default counters file", "meaning"]
    return Table(columns, rows, note, words=(2, 3, 4))


def training_metrics_table() -> Table:
    """The training process's own metrics, as a scrape names them."""
    rows = [[", ".join(m.samples), m.kind, m.unit, m.help] for m in TRAINING_METRICS]
    note = "A counter gains _total; a histogram is its buckets, count and sum."
    return Table(["name as scraped", "type", "unit", "help"], rows, note, words=(2, 3))


@dataclass(frozen=True)
class _Run:
    """One build-time run: the loop's measurements and what the scrape returned."""

    seconds: tuple[float, ...]  # each step's wall time, as the loop timed it
    losses: tuple[float, ...]
    flops_per_token: float  # PaLM's 6N
    scraped: dict[str, float]  # sample name -> value
    peak_rss: int  # bytes, getrusage after the scrape
    wall_s: float  # exporter start, steps, scrape and close


def _scrape(port: int) -> dict[str, float]:
    """Every sample at ``http://127.0.0.1:port/metrics``, by name (buckets by le)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        s.name + (f"{{le={s.labels['le']}}}" if "le" in s.labels else ""): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _train_and_scrape() -> _Run:
    """Train a tiny next-token model for SCRAPE_STEPS steps, observed and scraped."""
    gen = torch.Generator().manual_seed(_SEED)
    with torch.random.fork_rng(devices=[]):  # seeded init, global RNG left as it was
        torch.manual_seed(_SEED)
        model = nn.Sequential(
            nn.Embedding(_VOCAB, _DIM),
            nn.Linear(_DIM, 4 * _DIM),
            nn.GELU(),
            nn.Linear(4 * _DIM, _VOCAB),
        )

    def step(batch: torch.Tensor) -> float:
        logits = model(batch[:, :-1])  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, _VOCAB), batch[:, 1:].reshape(-1))
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= _LR * p.grad
                p.grad = None
        return loss.item()

    # PaLM's 6N per token: every weight of a matmul does a multiply-add forward and
    # two backward. FlopCounterMode counts exactly this for the model (test_metrics
    # uses it), but entering it imports torch._dynamo: a second of build time.
    per_token = 6.0 * sum(m.weight.numel() for m in model[1::2])  # the two Linears
    step(torch.randint(_VOCAB, (_BATCH, _SEQ), generator=gen))  # untimed warm-up

    t_start = time.perf_counter()
    exporter = TrainingExporter("cpu")
    port = exporter.start(port=0)
    seconds, losses, peak = [], [], NOMINAL_PEAK_FLOPS
    try:
        for _ in range(SCRAPE_STEPS):
            batch = torch.randint(_VOCAB, (_BATCH, _SEQ), generator=gen)  # (B, T)
            t0 = time.perf_counter()
            losses.append(step(batch))
            seconds.append(time.perf_counter() - t0)
            exporter.observe_step(seconds[-1], _TOKENS, losses[-1], per_token, peak)
        scraped = _scrape(port)
    finally:
        exporter.close()
    wall = time.perf_counter() - t_start
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # from kB
    return _Run(tuple(seconds), tuple(losses), per_token, scraped, peak_rss, wall)


@cache
def _run() -> _Run:
    """The build's one run, on one CPU thread, the caller's thread count restored.

    A model this small gains nothing from a second thread, and on a loaded machine
    the threads' spin-waits stretched its 2 ms steps a hundredfold.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_and_scrape()
    finally:
        torch.set_num_threads(threads)


def _relative(scraped: float, loop: float) -> str:
    """``"0"`` when the two are equal, else their relative difference."""
    return "0" if scraped == loop else f"{(scraped - loop) / loop:.1e}"


def scrape_table() -> Table:
    """What a scrape of the exporter returned beside the loop's own measurements."""
    run = _run()
    last = run.seconds[-1]
    loop = {
        "train_step_seconds": last,
        "train_tokens_per_second": _TOKENS / last,
        "train_mfu_ratio": _TOKENS * run.flops_per_token / last / NOMINAL_PEAK_FLOPS,
        "train_loss": run.losses[-1],
        "train_steps_total": float(SCRAPE_STEPS),
        "train_tokens_total": float(SCRAPE_STEPS * _TOKENS),
        "train_step_duration_seconds_count": float(SCRAPE_STEPS),
        "train_step_duration_seconds_sum": sum(run.seconds),
        "train_peak_memory_bytes": float(run.peak_rss),
    }
    rows = [
        [name, run.scraped[name], value, _relative(run.scraped[name], value)]
        for name, value in loop.items()
    ]
    note = (
        "Scraped: parsed from the exporter's /metrics over HTTP after the last step. "
        "Loop: the training loop's own timer, loss and step count; MFU from "
        "6 FLOPs per weight and token against a nominal peak of "
        f"{NOMINAL_PEAK_FLOPS:.0e} FLOP/s. Memory: the peak RSS, read from /proc by "
        "the exporter and from getrusage by the loop after the scrape."
    )
    stamp = results.machine_stamp(1, "gloo")
    on, fields = results.measured_on(stamp)
    stamp_text = (
        on + "; torch {torch}; {steps} steps of {tokens} tokens; serving, steps and "
        "scrape took {ms} ms"
    )
    fields |= {
        "torch": stamp["torch"],
        "steps": SCRAPE_STEPS,
        "tokens": _TOKENS,
        "ms": f"{run.wall_s * 1e3:.0f}",
    }
    columns = ["series", "scraped", "loop", "relative difference"]
    return Table(columns, rows, note, stamp=stamp_text, words=(), fields=fields)


def scrape_figure() -> Figure:
    """Each step's time and throughput, with what the gauges and histogram kept."""
    run, steps = _run(), range(1, SCRAPE_STEPS + 1)
    count = run.scraped["train_step_duration_seconds_count"]
    mean = run.scraped["train_step_duration_seconds_sum"] / count
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    ax_t, ax_r = fig.subplots(1, 2)
    ax_t.bar(steps, [1e3 * s for s in run.seconds], color="#9fc5e8", label="each step")
    ax_t.axhline(1e3 * mean, color="tab:green", lw=1.5, label="histogram sum / count")
    ax_t.set_ylim(0, 1.6e3 * max(run.seconds))  # room for the legend
    ax_r.plot(steps, [_TOKENS / s for s in run.seconds], label="each step")
    ax_r.set_ylim(bottom=0)
    for ax, gauge, scale, label, corner in (
        (ax_t, "train_step_seconds", 1e3, "step time (ms)", "upper right"),
        (ax_r, "train_tokens_per_second", 1.0, "tokens per second", "lower right"),
    ):
        value = scale * run.scraped[gauge]
        ax.plot([SCRAPE_STEPS], [value], "o", c="tab:red", label="gauge at the scrape")
        ax.set(xlabel="step", ylabel=label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.legend(fontsize=9, loc=corner)
    fig.suptitle("A gauge keeps the last step; the histogram keeps them all")
    return fig


def _rules() -> list[dict]:
    """The rules of ``alert_rules()`` with its defaults, all groups in order."""
    return [rule for group in alert_rules()["groups"] for rule in group["rules"]]


def alerts_table() -> Table:
    """The alert rules with their defaults: severity, wait, what each catches."""
    rows = [
        [r["alert"], r["labels"]["severity"], r["for"], r["annotations"]["description"]]
        for r in _rules()
    ]
    note = (
        "alert_rules() with its defaults; deploy/monitoring/alerts.yaml holds them "
        "with their expressions. For: how long the expression must hold before the "
        "alert fires."
    )
    columns = ["alert", "severity", "for", "what it catches"]
    return Table(columns, rows, note, words=(1, 3))


def xid_table() -> Table:
    """The XID classes the alerts tell apart: codes, meaning, whose fault, action."""
    rows = [
        [c.name, ", ".join(map(str, c.xids)), c.meaning, c.fault, c.action]
        for c in XID_CLASSES
    ]
    note = (
        "NVIDIA's XID catalog; each class is one alert, GpuXid<class>, firing when "
        "the last XID changes to one of its codes."
    )
    columns = ["class", "XIDs", "meaning", "usually", "what to do"]
    return Table(columns, rows, note, words=(0, 2, 3, 4))


def alert_count() -> int:
    """Alerting rules in the generated rule file."""
    return len(_rules())


def stall_minutes() -> int:
    """Minutes without a step before TrainingStalled fires (alert_rules' default)."""
    return inspect.signature(alert_rules).parameters["stall_minutes"].default


#: Grafana's dashboard grid is this many columns wide (its JSON model).
GRAFANA_COLUMNS = dashboard.GRID_COLUMNS
_COLORS = {"training job": "#9fc5e8", "GPUs": "#cde8cd"}  # the legend's labels


def dashboard_panel_count() -> int:
    """Panels of the generated Grafana dashboard: one per exported metric."""
    return len(grafana_dashboard()["panels"])


def dashboard_figure() -> Figure:
    """The dashboard's panels where their ``gridPos`` puts them on Grafana's grid."""
    panels = grafana_dashboard()["panels"]
    training = {m.name for m in TRAINING_METRICS}
    bottom = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    fig = Figure(figsize=(10, 0.065 * bottom + 1.0), layout="constrained")
    ax = fig.add_subplot()
    for p in panels:
        g = p["gridPos"]
        color = _COLORS["training job" if p["title"] in training else "GPUs"]
        box = (g["x"] + 0.15, g["y"] + 0.4), g["w"] - 0.3, g["h"] - 0.8
        ax.add_patch(Rectangle(*box, fc=color, ec="black", lw=0.8))
        x, y = g["x"] + g["w"] / 2, g["y"] + g["h"] / 2
        name = p["title"].removeprefix("DCGM_FI_")  # the caption says so
        ax.text(x, y, name, ha="center", va="center", fontsize=9)
    ax.set(xlim=(0, GRAFANA_COLUMNS), ylim=(bottom, 0))  # Grafana's y grows down
    ax.set_xticks(range(0, GRAFANA_COLUMNS + 1, 6))
    ax.set_yticks(range(0, bottom + 1, panels[0]["gridPos"]["h"]))
    ax.set(xlabel="grid column", ylabel="grid row")
    handles = [Patch(fc=c, ec="black", label=k) for k, c in _COLORS.items()]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.06), ncol=2)
    return fig


def _reference_job() -> TrainingJob:
    """The book's reference job as ``aiinfra k8s render`` renders it by default."""
    return TrainingJob(
        REFERENCE_NAME,
        REFERENCE_IMAGE,
        REFERENCE_COMMAND,
        2,
        8,
        metrics_port=METRICS_PORT,
        ckpt_claim=CKPT_CLAIM,
    )


def scrape_labels_table() -> Table:
    """The labels that tie a training pod's series to its GPUs' series."""
    job = _reference_job()
    objects = RENDERERS["jobset"](job)
    monitor = objects[-1]  # the PodMonitor, last
    pod_labels = objects[0]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["metadata"]["labels"]
    service = scrape.dcgm_service_monitor()
    chart = {scrape.DCGM_NAME_LABEL: scrape.DCGM_CHART}
    # An Indexed Job's pod is <job>-<index>-<random suffix>; the JobSet's job is
    # <jobset>-<replicated job>-<job index>, so pod 0 starts with its hostname.
    pod = job.head_host("jobset").split(".")[0] + "-<random>"
    rows = [
        [
            "job",
            scrape.target_job(monitor, pod_labels),
            scrape.target_job(service, chart, scrape.DCGM_CHART),
            "the monitor's jobLabel: a label of the pod (of the Service)",
        ],
        [
            "namespace",
            job.namespace,
            job.namespace,
            "the pod's namespace; dcgm-exporter: that of the pod holding the GPU",
        ],
        [
            "pod",
            pod,
            pod,
            "the pod's name; dcgm-exporter: the pod holding the GPU",
        ],
    ]
    columns = ["label", "the job's series", "its GPUs' series", "set by"]
    note = (
        "The PodMonitor and the ServiceMonitor that aiinfra k8s render and aiinfra "
        "k8s monitoring write, as prometheus-operator turns them into scrape jobs; "
        "the GPUs' pod labels are dcgm-exporter's Kubernetes mode, kept by "
        "honorLabels. The pod name's last five characters are random."
    )
    return Table(columns, rows, note, words=(3,))


def _join_series(honor_labels: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Labels of pod 0's training series and of one of its GPUs' series.

    The training target's labels are those the PodMonitor gives (its ``job`` by
    :func:`aiinfra.cloud.scrape.target_job`); the GPU's are dcgm-exporter's pod
    labels under the names :func:`aiinfra.cloud.scrape.dcgm_series_labels` gives
    them, beside the exporter target's own ``namespace`` and ``pod``.
    """
    job = _reference_job()
    objects = RENDERERS["jobset"](job)
    monitor = objects[-1]
    labels = objects[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "metadata"
    ]["labels"]
    pod = job.head_host("jobset").split(".")[0] + "-<random>"
    train = {
        "job": scrape.target_job(monitor, labels),
        "namespace": job.namespace,
        "pod": pod,
    }
    service = scrape.dcgm_service_monitor(honor_labels=honor_labels)
    exporter = {
        "namespace": service["metadata"]["namespace"],
        "pod": f"{scrape.DCGM_CHART}-<random>",
    }
    names = scrape.dcgm_series_labels(service)
    gpu_pod = {"pod": pod, "namespace": job.namespace, "container": CONTAINER}
    gpu = dict(zip(names, gpu_pod.values(), strict=True))
    for name, value in exporter.items():
        gpu.setdefault(name, value)  # the target's own label, unless honoured away
    return train, gpu


def join_figure() -> Figure:
    """The ``and on (namespace, pod)`` join with and without ``honorLabels``."""
    fig = Figure(figsize=(10, 4.8), layout="constrained")
    axes = fig.subplots(1, 2)
    fig.suptitle(f"and on ({', '.join(scrape.JOIN_LABELS)})", family="monospace")
    for ax, honor in zip(axes, (True, False), strict=True):
        train, gpu = _join_series(honor)
        ax.set_title(
            f"honorLabels: {str(honor).lower()}", fontsize=11, family="monospace"
        )
        ax.text(0.02, 0.92, "the job's series", fontsize=10, color="#3182bd")
        ax.text(0.02, 0.5, "its GPUs' series", fontsize=10, color="#31a354")
        rows = {}
        for y0, labels, color in ((0.84, train, "#3182bd"), (0.42, gpu, "#31a354")):
            for i, (name, value) in enumerate(labels.items()):
                y = y0 - i * 0.07
                ax.text(
                    0.04,
                    y,
                    f"{name}={value}",
                    fontsize=9,
                    family="monospace",
                    color=color,
                )
                rows.setdefault(name, []).append(y)
        matched = all(train[k] == gpu.get(k) for k in scrape.JOIN_LABELS)
        for name in scrape.JOIN_LABELS:
            (y_train, *rest) = rows[name]
            if not rest:
                continue
            same = train[name] == gpu[name]
            ax.annotate(
                "",
                xy=(0.015, rest[0] + 0.02),
                xytext=(0.015, y_train + 0.02),
                arrowprops={
                    "arrowstyle": "<->",
                    "color": "#31a354" if same else "#d62728",
                    "connectionstyle": "arc3,rad=0.35",
                },
            )
        ax.text(
            0.5,
            0.02,
            "match: the job's GPUs are kept"
            if matched
            else "no match: the join keeps nothing",
            ha="center",
            fontsize=10,
            color="#31a354" if matched else "#d62728",
        )
        ax.set_xlim(-0.15, 1)
        ax.set_ylim(0, 1)
        ax.axis("off")
    return fig
