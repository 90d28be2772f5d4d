"""TrainingExporter: a real training loop's own measurements, scraped back over HTTP."""

import resource
import socket
import time
import urllib.error
import urllib.request

import pytest
import torch
import torch.nn.functional as F
from aiinfra.cloud.metrics import (
    DCGM_METRICS,
    STEP_BUCKETS,
    TRAINING_METRICS,
    TrainingExporter,
)
from prometheus_client.parser import text_string_to_metric_families
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

VOCAB, DIM, BATCH, SEQ, STEPS = 64, 32, 4, 17, 10
TOKENS = BATCH * (SEQ - 1)  # next-token targets per step
PEAK_FLOPS = 1e12  # a nominal peak: MFU is checked as arithmetic, not as a CPU fact

# NVIDIA/dcgm-exporter etc/default-counters.csv at d5e5f510a1b6 (2026-05-12): the
# fields it enables, and the ones it lists commented out, with their declared types.
UPSTREAM_ENABLED = {
    **dict.fromkeys(
        "DCGM_FI_DEV_SM_CLOCK DCGM_FI_DEV_MEM_CLOCK DCGM_FI_DEV_MEMORY_TEMP "
        "DCGM_FI_DEV_GPU_TEMP DCGM_FI_DEV_POWER_USAGE DCGM_FI_DEV_GPU_UTIL "
        "DCGM_FI_DEV_MEM_COPY_UTIL DCGM_FI_DEV_ENC_UTIL DCGM_FI_DEV_DEC_UTIL "
        "DCGM_FI_DEV_XID_ERRORS DCGM_FI_DEV_FB_FREE DCGM_FI_DEV_FB_USED "
        "DCGM_FI_DEV_FB_RESERVED DCGM_FI_DEV_VGPU_LICENSE_STATUS "
        "DCGM_FI_DEV_ROW_REMAP_FAILURE DCGM_FI_PROF_GR_ENGINE_ACTIVE "
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE DCGM_FI_PROF_DRAM_ACTIVE "
        "DCGM_FI_PROF_PCIE_TX_BYTES DCGM_FI_PROF_PCIE_RX_BYTES".split(),
        "gauge",
    ),
    **dict.fromkeys(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION DCGM_FI_DEV_PCIE_REPLAY_COUNTER "
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS "
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS".split(),
        "counter",
    ),
}
UPSTREAM_COMMENTED = {
    "DCGM_FI_PROF_SM_ACTIVE": "gauge",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "counter",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "counter",
}
# DCGM fields 1011/1012 (NVIDIA/go-dcgm pkg/dcgm/const_fields.go), in no exporter CSV.
GO_DCGM_ONLY = {"DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_PROF_NVLINK_RX_BYTES"}


def _scrape(port: int) -> list:
    """All metric families at ``http://127.0.0.1:port/metrics``, parsed."""
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        return list(text_string_to_metric_families(response.read().decode()))


def _value(families: list, sample: str, **labels: str) -> float:
    """The value of the one sample called ``sample`` with ``labels``."""
    (value,) = [
        s.value
        for f in families
        for s in f.samples
        if s.name == sample and s.labels == labels
    ]
    return value


def _peak_rss_bytes() -> int:
    """The peak RSS as getrusage reports it (kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.fixture(scope="module")
def run() -> dict:
    """Ten steps of a small MLP language model, observed and then scraped."""
    gen = torch.Generator().manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(VOCAB, DIM),
        nn.Linear(DIM, 4 * DIM),
        nn.GELU(),
        nn.Linear(4 * DIM, VOCAB),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step(batch: torch.Tensor) -> float:
        logits = model(batch[:, :-1])  # (B, T-1, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.item()

    # The model's FLOPs per step, counted by PyTorch on one untimed step.
    with FlopCounterMode(display=False) as counter:
        step(torch.randint(VOCAB, (BATCH, SEQ), generator=gen))
    flops_per_step = counter.get_total_flops()

    exporter = TrainingExporter("cpu")
    port = exporter.start(port=0)
    seconds, losses = [], []
    try:
        for _ in range(STEPS):
            batch = torch.randint(VOCAB, (BATCH, SEQ), generator=gen)  # (B, T)
            t0 = time.perf_counter()
            losses.append(step(batch))
            seconds.append(time.perf_counter() - t0)
            rss_before = _peak_rss_bytes()
            exporter.observe_step(
                seconds[-1], TOKENS, losses[-1], flops_per_step / TOKENS, PEAK_FLOPS
            )
        families = _scrape(port)
        rss_after = _peak_rss_bytes()
    finally:
        exporter.close()
    return dict(
        families=families,
        seconds=seconds,
        losses=losses,
        port=port,
        flops_per_step=flops_per_step,
        rss=(rss_before, rss_after),
    )


def test_scrape_equals_the_loops_own_last_step(run):
    families, last = run["families"], run["seconds"][-1]
    # repr() round-trips a float, and prometheus_client writes repr(): exact.
    assert _value(families, "train_step_seconds") == last
    assert _value(families, "train_loss") == run["losses"][-1]
    assert _value(families, "train_tokens_per_second") == pytest.approx(
        TOKENS / last, rel=1e-12
    )
    mfu = run["flops_per_step"] / last / PEAK_FLOPS  # FlopCounterMode's count
    assert run["flops_per_step"] > 0
    assert _value(families, "train_mfu_ratio") == pytest.approx(mfu, rel=1e-12)


def test_counters_count_every_step_and_token(run):
    assert _value(run["families"], "train_steps_total") == STEPS
    assert _value(run["families"], "train_tokens_total") == STEPS * TOKENS


def test_histogram_buckets_hold_the_loops_step_times(run):
    families, seconds = run["families"], run["seconds"]
    assert _value(families, "train_step_duration_seconds_count") == STEPS
    assert _value(families, "train_step_duration_seconds_sum") == pytest.approx(
        sum(seconds), rel=1e-12
    )
    for le in STEP_BUCKETS:
        below = sum(s <= le for s in seconds)
        sample = _value(families, "train_step_duration_seconds_bucket", le=repr(le))
        assert sample == below, le


def test_memory_is_the_processs_peak_rss(run):
    rss_before, rss_after = run["rss"]
    # /proc and getrusage read the kernel's per-CPU RSS counters, which lag by a few
    # pages: allow 4 MiB either side (the process holds hundreds of MiB).
    slack = 4 * 2**20
    value = _value(run["families"], "train_peak_memory_bytes")
    assert rss_before - slack <= value <= rss_after + slack


def test_scrape_shows_exactly_the_listed_metrics(run):
    shown = {
        s.name
        for f in run["families"]
        for s in f.samples
        if not s.name.endswith("_created")
    }
    assert shown == {name for m in TRAINING_METRICS for name in m.samples}
    families = [f for f in run["families"] if not f.name.endswith("_created")]
    kinds = {f.name: (f.type, f.documentation) for f in families}
    assert kinds == {m.name: (m.kind, m.help) for m in TRAINING_METRICS}


def test_close_frees_the_port(run):
    with socket.socket() as s:
        # The scrape's connection may linger in TIME_WAIT; a listener would not.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", run["port"]))  # would raise EADDRINUSE if still served
    with pytest.raises(urllib.error.URLError):
        _scrape(run["port"])


def test_two_exporters_keep_separate_registries():
    a, b = TrainingExporter(), TrainingExporter()
    port_a, port_b = a.start(), b.start()
    try:
        a.observe_step(0.5, 100, 2.0, 6.0, 1e12)
        assert port_a != port_b
        assert _value(_scrape(port_a), "train_steps_total") == 1
        assert _value(_scrape(port_b), "train_steps_total") == 0
    finally:
        a.close()
        b.close()


GOOD = dict(
    step_seconds=0.5, tokens=100, loss=2.0, flops_per_token=6.0, peak_flops=1e12
)


@pytest.mark.parametrize(
    ("arg", "bad"),
    [
        ("step_seconds", 0.0),
        ("step_seconds", -1.0),
        ("step_seconds", float("nan")),
        ("tokens", -1),
        ("loss", float("nan")),
        ("loss", float("inf")),
        ("flops_per_token", 0.0),
        ("peak_flops", -1e12),
        ("peak_flops", float("inf")),
    ],
)
def test_bad_step_names_the_argument_and_records_nothing(arg, bad):
    exporter = TrainingExporter()
    with pytest.raises(ValueError, match=f"^{arg} must be finite"):
        exporter.observe_step(**{**GOOD, arg: bad})
    assert exporter.registry.get_sample_value("train_steps_total") == 0


def test_bad_port_and_second_start_are_rejected():
    exporter = TrainingExporter()
    with pytest.raises(ValueError, match="port must be in"):
        exporter.start(port=70000)
    exporter.start()
    try:
        with pytest.raises(RuntimeError, match="already serving"):
            exporter.start()
    finally:
        exporter.close()
    exporter.close()  # a second close is a no-op


def test_dcgm_fields_match_dcgm_exporters_counters_file():
    for name, field in DCGM_METRICS.items():
        assert field.default == (name in UPSTREAM_ENABLED), name
        upstream = UPSTREAM_ENABLED | UPSTREAM_COMMENTED
        assert name in upstream or name in GO_DCGM_ONLY, name
        assert field.kind == upstream.get(name, "gauge"), name
