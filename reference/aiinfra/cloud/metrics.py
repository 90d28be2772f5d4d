"""Training metrics: one list, a Prometheus exporter, and the DCGM fields beside it.

A training job is watched from two sides. The job itself knows its step time, its
throughput, its loss and its model FLOPs utilisation (MFU, PaLM's Appendix B:
``MFU = tokens * flops_per_token / step_seconds / peak_flops``); it serves them over
HTTP for Prometheus to scrape. NVIDIA's DCGM exporter, a DaemonSet on every GPU node,
serves the hardware's side: utilisation, memory, power, XID errors, link traffic.
``TRAINING_METRICS`` and ``DCGM_METRICS`` are the single description of both; the
exporter, the alert rules (:mod:`aiinfra.cloud.alerts`) and the dashboard
(:mod:`aiinfra.cloud.dashboard`) are all generated from them, so none can name a
metric that nothing exports.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import prometheus_client
import torch

from aiinfra.cloud.job import REFERENCE_NAME

#: The Prometheus ``job`` label of the training pods' scrape target: the job's
#: name, which its PodMonitor's ``jobLabel`` copies from the pods' label.
DEFAULT_JOB = REFERENCE_NAME
#: Upper bounds of the step-time histogram's buckets, seconds: 1/64 s to 128 s.
STEP_BUCKETS = tuple(2.0**k for k in range(-6, 8))


@dataclass(frozen=True)
class TrainingMetric:
    """One metric the training process exports.

    Args:
        name: the Prometheus metric name, before prometheus_client's suffixes.
        kind: ``"gauge"``, ``"counter"`` or ``"histogram"``.
        unit: the base unit of a sample (``"seconds"``, ``"bytes"``, ``"ratio"``...).
        help: the ``# HELP`` text.
    """

    name: str
    kind: str
    unit: str
    help: str

    @property
    def samples(self) -> tuple[str, ...]:
        """The series names a scrape shows (a counter gains ``_total``)."""
        if self.kind == "counter":
            return (f"{self.name}_total",)
        if self.kind == "histogram":
            return tuple(f"{self.name}_{s}" for s in ("bucket", "count", "sum"))
        return (self.name,)


TRAINING_METRICS = (
    TrainingMetric("train_step_seconds", "gauge", "seconds", "Last step's wall time."),
    TrainingMetric(
        "train_step_duration_seconds", "histogram", "seconds", "Step wall times."
    ),
    TrainingMetric(
        "train_tokens_per_second", "gauge", "tokens/s", "Last step's throughput."
    ),
    TrainingMetric(
        "train_mfu_ratio", "gauge", "ratio", "Last step's model FLOPs utilisation."
    ),
    TrainingMetric("train_loss", "gauge", "nats", "Last step's training loss."),
    TrainingMetric(
        "train_peak_memory_bytes", "gauge", "bytes", "CUDA max allocated, or peak RSS."
    ),
    TrainingMetric("train_steps", "counter", "steps", "Optimizer steps completed."),
    TrainingMetric("train_tokens", "counter", "tokens", "Tokens processed."),
)


@dataclass(frozen=True)
class DcgmField:
    """One field of NVIDIA's dcgm-exporter, exported under its own DCGM name.

    Args:
        kind: ``"gauge"`` or ``"counter"``, as the exporter declares it.
        unit: the unit of a sample.
        default: whether dcgm-exporter's default counters file enables it; the
            others must be added to the counters CSV to be scraped.
        meaning: what it tells about a training job.
    """

    kind: str
    unit: str
    default: bool
    meaning: str


# Field names, types and units checked against NVIDIA/dcgm-exporter
# etc/default-counters.csv and etc/dcp-metrics-included.csv (commit d5e5f510a1b6,
# 2026-05-12). DCGM_FI_PROF_NVLINK_{TX,RX}_BYTES are in neither file: they are DCGM
# fields 1011/1012 (NVIDIA/go-dcgm pkg/dcgm/const_fields.go) and must be added.
DCGM_METRICS = {
    "DCGM_FI_DEV_GPU_UTIL": DcgmField(
        "gauge", "percent", True, "Time any kernel ran: coarse, one busy SM is 100."
    ),
    "DCGM_FI_PROF_SM_ACTIVE": DcgmField(
        "gauge", "ratio", False, "Cycles an SM holds >= 1 warp: low if starved."
    ),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": DcgmField(
        "gauge", "ratio", True, "Cycles the tensor pipe is busy: tracks MFU."
    ),
    "DCGM_FI_PROF_DRAM_ACTIVE": DcgmField(
        "gauge", "ratio", True, "Cycles the HBM interface moves data."
    ),
    "DCGM_FI_DEV_FB_USED": DcgmField("gauge", "MiB", True, "Device memory used."),
    "DCGM_FI_DEV_FB_FREE": DcgmField("gauge", "MiB", True, "Device memory free."),
    "DCGM_FI_DEV_XID_ERRORS": DcgmField(
        "gauge", "code", True, "Last XID error: 79 off the bus, 48 double-bit ECC."
    ),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": DcgmField(
        "gauge", "bool", True, "1 when HBM row remapping failed: drain the node."
    ),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": DcgmField(
        "counter", "errors", False, "NVLink flow-control CRC errors, all links."
    ),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": DcgmField(
        "counter", "errors", False, "NVLink link recoveries, all links."
    ),
    "DCGM_FI_PROF_NVLINK_TX_BYTES": DcgmField(
        "gauge", "bytes/s", False, "NVLink send rate: tensor-parallel traffic."
    ),
    "DCGM_FI_PROF_NVLINK_RX_BYTES": DcgmField(
        "gauge", "bytes/s", False, "NVLink receive rate."
    ),
    "DCGM_FI_PROF_PCIE_TX_BYTES": DcgmField(
        "gauge", "bytes/s", True, "PCIe send rate: NIC, host and storage traffic."
    ),
    "DCGM_FI_PROF_PCIE_RX_BYTES": DcgmField(
        "gauge", "bytes/s", True, "PCIe receive rate."
    ),
    "DCGM_FI_DEV_POWER_USAGE": DcgmField("gauge", "watts", True, "Power draw."),
    "DCGM_FI_DEV_GPU_TEMP": DcgmField("gauge", "celsius", True, "GPU temperature."),
}


def dcgm_counters_csv() -> str:
    """dcgm-exporter's counters file enabling every field of :data:`DCGM_METRICS`.

    The exporter scrapes only the fields its counters file lists (``-f``); its two
    default files comment out ``DCGM_FI_PROF_SM_ACTIVE`` and the NVLink error
    counters, and list neither ``DCGM_FI_PROF_NVLINK_TX_BYTES`` nor ``_RX_``, which
    the alerts and the dashboard read. One line per field: ``name, type, help``
    (commas in the help become semicolons: the file is CSV).
    """
    lines = [
        "# Format: DCGM field, Prometheus metric type, help message",
        "# Every field the book's alerts and dashboard read (aiinfra k8s monitoring).",
    ]
    for name, field in DCGM_METRICS.items():
        lines.append(f"{name}, {field.kind}, {field.meaning.replace(',', ';')}")
    return "\n".join(lines) + "\n"


def _host_peak_rss_bytes() -> int:
    """The process's peak resident set size, ``VmHWM`` of ``/proc/self/status``."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB
    raise RuntimeError("/proc/self/status has no VmHWM line")


def _finite(
    name: str, value: float, low: float | None = None, strict: bool = True
) -> None:
    """Raise unless ``value`` is finite and > ``low`` (>= when not ``strict``)."""
    if low is None:
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
    elif not (math.isfinite(value) and (value > low if strict else value >= low)):
        op = ">" if strict else ">="
        raise ValueError(f"{name} must be finite and {op} {low}, got {value!r}")


def _collector(
    metric: TrainingMetric, registry: prometheus_client.CollectorRegistry
) -> prometheus_client.metrics.MetricWrapperBase:
    """The prometheus_client object of ``metric``, registered in ``registry``."""
    if metric.kind == "histogram":
        # Steps take milliseconds (a test) to a minute (a large model): doubling
        # buckets keep any quantile within 2x between 1/64 s and 128 s.
        return prometheus_client.Histogram(
            metric.name, metric.help, registry=registry, buckets=STEP_BUCKETS
        )
    kind = {"gauge": prometheus_client.Gauge, "counter": prometheus_client.Counter}
    return kind[metric.kind](metric.name, metric.help, registry=registry)


class TrainingExporter:
    """Serves ``TRAINING_METRICS`` of one training process to Prometheus.

    The metrics live in the exporter's own ``CollectorRegistry``, so two exporters
    (or two tests) in one process never collide in prometheus_client's global one.

    Args:
        device: the training device; on CUDA the memory metric is
            ``torch.cuda.max_memory_allocated``, elsewhere the host's peak RSS.
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        self.device = torch.device(device)
        self.registry = prometheus_client.CollectorRegistry()
        self._metrics = {m.name: _collector(m, self.registry) for m in TRAINING_METRICS}
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self, port: int = 0, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` from a daemon thread.

        Args:
            port: the TCP port, or 0 for any free one.
            addr: the address to listen on: ``127.0.0.1`` for this machine only,
                ``0.0.0.0`` in a pod, where Prometheus scrapes the pod's IP.

        Returns:
            The port the server is bound to.

        Raises:
            ValueError: ``port`` outside [0, 65535].
            RuntimeError: the exporter is already serving.
        """
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in [0, 65535], got {port}")
        if self._server is not None:
            raise RuntimeError("the exporter is already serving")
        # start_http_server returns the WSGI server: it knows the port the OS chose.
        self._server, self._thread = prometheus_client.start_http_server(
            port, addr=addr, registry=self.registry
        )
        return self._server.server_port

    def observe_step(
        self,
        step_seconds: float,
        tokens: int,
        loss: float,
        flops_per_token: float,
        peak_flops: float,
    ) -> None:
        """Record one finished optimizer step.

        Args:
            step_seconds: the step's wall time, seconds, > 0.
            tokens: tokens the step processed (all ranks' share of this one), >= 0.
            loss: the step's training loss, finite.
            flops_per_token: model FLOPs per token, forward and backward, > 0.
            peak_flops: the device's peak FLOP/s at the training dtype, > 0.

        Raises:
            ValueError: an argument outside its range, naming it.
        """
        _finite("step_seconds", step_seconds, 0)
        _finite("tokens", tokens, 0, strict=False)
        _finite("loss", loss)
        _finite("flops_per_token", flops_per_token, 0)
        _finite("peak_flops", peak_flops, 0)
        tokens_per_second = tokens / step_seconds
        mfu = tokens_per_second * flops_per_token / peak_flops  # PaLM, Appendix B
        if self.device.type == "cuda":
            memory = torch.cuda.max_memory_allocated(self.device)
        else:
            memory = _host_peak_rss_bytes()
        m = self._metrics
        m["train_step_seconds"].set(step_seconds)
        m["train_step_duration_seconds"].observe(step_seconds)
        m["train_tokens_per_second"].set(tokens_per_second)
        m["train_mfu_ratio"].set(mfu)
        m["train_loss"].set(loss)
        m["train_peak_memory_bytes"].set(memory)
        m["train_steps"].inc()
        m["train_tokens"].inc(tokens)

    def close(self) -> None:
        """Stop serving and free the port; a no-op when not serving."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._server, self._thread = None, None
