"""A GPU's results beside the CPU's: shown where a stamped GPU file exists, not else.

No GPU here: the GPU files are synthetic (the CPU's files relabelled, and an
attention run written by hand), in a data folder of the test's own
(``$AIINFRA_RESULTS_DIR``); the committed book has none.
"""

import json
import shutil

import pytest
from aiinfra import results
from aiinfra.book.hardware import roofline
from aiinfra.book.models import flash_attention
from aiinfra.book.training import ddp, planner

GPU = "NVIDIA H200"


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A copy of the book's results in a folder of the test's own."""
    for f in results.DEFAULT_DATA.glob("*.json"):
        shutil.copy(f, tmp_path)
    monkeypatch.setenv(results.DATA_ENV, str(tmp_path))
    return tmp_path


def _as_gpu(data, cpu_file, gpu_file, backend, edit=None):
    doc = json.loads((data / cpu_file).read_text())
    doc["stamp"] |= {"gpu": GPU, "backend": backend, "date": "2026-12-24T08:00:00"}
    if edit:
        edit(doc)
    (data / gpu_file).write_text(json.dumps(doc))
    return doc


def test_without_a_gpu_file_the_pages_show_nothing_more(data):
    assert roofline.measured_gpu_kernel_table() is None
    assert flash_attention.gpu_attention_table() is None
    table = ddp.ddp_results_table()
    assert "GPU step (ms)" not in table.columns and "GPU" not in table.stamp


def test_a_roofline_gpu_file_becomes_a_table_stamped_with_the_gpu(data):
    def faster(doc):  # a GPU's roofs: 1000 times the CPU's
        doc["roofs"]["peak_flops"] *= 1000
        doc["roofs"]["bandwidth"] *= 1000
        for k in doc["kernels"]:
            k["seconds"] /= 1000

    _as_gpu(data, "roofline-cpu.json", "roofline-cuda.json", "cuda", faster)
    cpu, gpu = roofline.kernel_table(), roofline.measured_gpu_kernel_table()
    assert [r[0] for r in gpu.rows] == [r[0] for r in cpu.rows]  # the same kernels
    for c, g in zip(cpu.rows, gpu.rows, strict=True):
        assert g[2] == pytest.approx(1000 * c[2], rel=0.01)  # GFLOP/s measured
    assert gpu.fields["machine"] == GPU and gpu.fields["date"] == "2026-12-24"
    peak = json.loads((data / "roofline-cuda.json").read_text())["roofs"]["peak_flops"]
    assert gpu.fields["peak"] == f"{peak / 1e12:.1f} TFLOP/s"


def test_a_ddp_gpu_file_adds_its_step_times_beside_the_cpus(data):
    def ten_times_faster(doc):
        for r in doc["rows"]:
            r["step_s"] /= 10

    doc = _as_gpu(data, "ddp-gloo.json", "ddp-nccl.json", "nccl", ten_times_faster)
    table = ddp.ddp_results_table()
    assert table.columns[-2:] == ["GPU step (ms)", "GPU / DDP"]
    for row in table.rows:
        gpu_ms = next(
            1e3 * r["step_s"]
            for r in doc["rows"]
            if (r["impl"], r["bucket_mib"]) == (row[0], row[1])
        )
        assert row[-2] == round(gpu_ms, 2)
        assert row[-2] == pytest.approx(row[2] / 10, rel=0.05)  # the CPU's ms / 10
    assert table.fields["gpu_machine"] == GPU and "GPU: " in table.stamp


def test_a_ddp_gpu_run_of_other_buckets_shows_dashes_there(data):
    def one_bucket(doc):
        top = max(doc["config"]["bucket_mib"])
        doc["rows"] = [r for r in doc["rows"] if r["bucket_mib"] == top]

    doc = _as_gpu(data, "ddp-gloo.json", "ddp-nccl.json", "nccl", one_bucket)
    top = max(doc["config"]["bucket_mib"])
    table = ddp.ddp_results_table()
    for row in table.rows:
        assert (row[-2:] == ["-", "-"]) == (row[1] != top), row


def test_an_attention_gpu_file_becomes_a_table_stamped_with_the_gpu(data):
    config = {"device": "cuda", "dtype": "bfloat16", "batch": 1, "heads": 16}
    config |= {"head_dim": 128, "causal": True, "repeats": 20}
    rows = [
        {"impl": impl, "pass": "forward", "N": 4096, "ms": ms, "peak_mib": 8.0}
        | {"tflops": tf}
        for impl, ms, tf in (("standard", 2.5, 50.0), ("sdpa", 0.4, 310.0))
    ]
    doc = {"config": config, "rows": rows}
    results.write("attention", doc, backend="cuda", world_size=1)
    stamped = json.loads((data / "attention-cuda.json").read_text())
    stamped["stamp"]["gpu"] = GPU  # this machine has no CUDA to name one
    (data / "attention-cuda.json").write_text(json.dumps(stamped))
    table = flash_attention.gpu_attention_table()
    assert [r[0] for r in table.rows] == ["standard", "sdpa"]
    assert [r[-1] for r in table.rows] == [50.0, 310.0]
    assert table.fields["machine"] == GPU and table.fields["head_dim"] == 128


def test_a_roofline_gpu_file_puts_its_matmuls_beside_the_gemm_model(data):
    from aiinfra.plan import gemm

    shapes = [(1536, 8192, 8192), (1537, 8192, 8192)]

    def h200_matmuls(doc):  # times the model itself gives, 10 % slower
        doc["matmuls"] = [
            {
                "m": m,
                "k": k,
                "n": n,
                "dtype": "bfloat16",
                "seconds": 1.1 * gemm.gemm_seconds(m, n, k, "H200"),
            }
            for m, n, k in shapes
        ] + [{"m": 8, "k": 8, "n": 8, "dtype": "float32", "seconds": 1.0}]

    assert planner.gemm_measured_table() is None  # no GPU file: nothing shown
    _as_gpu(data, "roofline-cpu.json", "roofline-cuda.json", "cuda", h200_matmuls)
    table = planner.gemm_measured_table()
    assert [r[0] for r in table.rows] == ["1536 x 8192 x 8192", "1537 x 8192 x 8192"]
    for (m, n, k), row in zip(shapes, table.rows, strict=True):
        assert row[1] == round(
            2 * m * n * k / (1.1 * gemm.gemm_seconds(m, n, k, "H200")) / 1e12, 1
        )
        assert row[3] == pytest.approx(1 / 1.1, abs=0.01)
    # the spilled row runs a whole wave more: slower per FLOP, measured and modelled
    assert table.rows[1][2] < table.rows[0][2]
    assert table.fields["machine"] == GPU


def test_a_gpu_the_gemm_model_does_not_know_shows_nothing(data):
    def unknown(doc):
        doc["stamp"]["gpu"] = "Some Accelerator X1"

    _as_gpu(data, "roofline-cpu.json", "roofline-cuda.json", "cuda", unknown)
    assert planner.gemm_measured_table() is None
