"""The measured roofline: roofs positive, points under them, file and command."""

import json

import matplotlib
import pytest
import torch
from aiinfra import cli, results
from aiinfra.accelerators import GPUS
from aiinfra.hardware import roofline_bench as rb
from aiinfra.models.roofline import matmul, prefill_attention

NOISE = 1.2  # a shared machine: a point may beat its roof by timing noise alone


@pytest.fixture(scope="module")
def smoke():
    return rb.run_roofline_bench(rb.SMOKE)


def test_measured_roofs_are_positive_and_meet_at_the_ridge(smoke):
    r = smoke["roofs"]
    assert r["peak_flops"] > 0 and r["bandwidth"] > 0
    assert r["ridge"] * r["bandwidth"] == pytest.approx(r["peak_flops"])
    # the peak is the fastest matmul of the sweep, the bandwidth the fastest stream
    rates = [2 * m["m"] * m["k"] * m["n"] / m["seconds"] for m in smoke["matmuls"]]
    assert r["peak_flops"] == max(rates)
    assert len(smoke["matmuls"]) == len(rb.SMOKE.square) + len(rb.SMOKE.skinny)
    assert {s["kernel"] for s in smoke["streams"]} == {"read", "copy", "triad"}


def test_the_roofline_bounds_every_kernel_of_the_smoke_run(smoke):
    peak, bw = smoke["roofs"]["peak_flops"], smoke["roofs"]["bandwidth"]
    for k in smoke["kernels"]:
        rate, intensity = k["flops"] / k["seconds"], k["flops"] / k["bytes"]
        assert 0 < rate <= min(peak, intensity * bw) * NOISE, k["name"]


def test_kernel_counts_are_the_compulsory_traffic_of_their_tensors(smoke):
    c, by_name = rb.SMOKE, {k["name"]: k for k in smoke["kernels"]}
    d, f, H, T, D, S = c.d_model, c.d_ff, c.heads, c.seq_len, c.head_dim, c.context
    x, w = torch.empty(1, d), torch.empty(d, f)
    gemv = by_name["decode GEMV"]  # x and W read, x W written, fp32
    assert gemv["bytes"] == x.nbytes + w.nbytes + (x @ w).nbytes
    assert gemv["flops"] == 2 * d * f
    assert by_name["decode attention"]["bytes"] == 2 * torch.empty(H, S, D).nbytes
    fused, written = by_name["attention, fused"], by_name["attention, as written"]
    assert fused["flops"] == written["flops"] == 4 * H * T * T * D
    scores = torch.empty(H, T, T).nbytes  # S written, read; P written, read
    assert written["bytes"] - fused["bytes"] == 4 * scores
    assert by_name["prefill GEMM"]["flops"] == matmul(c.prefill_tokens, d, f).flops
    assert fused["bytes"] == H * prefill_attention(T, D, True, 4).bytes


def test_attainable_is_the_gpu_roofline_of_the_datasheet():
    h100 = GPUS["H100"]
    for intensity in (0.5, 1, 64, h100.ridge, 1000):
        got = rb.attainable(intensity, h100.bf16_flops, h100.hbm_bandwidth)
        assert got == pytest.approx(h100.attainable(intensity))


def test_table_and_figure_show_each_kernel(smoke):
    stamp = {"cpu": "a CPU", "cpu_count": 1, "load_1min": 0, "torch": "2", "date": ""}
    table = rb.roofline_bench_table(smoke | {"stamp": stamp})
    assert [r[0] for r in table.rows] == [k["name"] for k in smoke["kernels"]]
    matplotlib.use("Agg")
    fig = rb.roofline_bench_figure(smoke)
    ax = fig.axes[0]
    roof = ax.lines[0].get_ydata()
    assert max(roof) == pytest.approx(smoke["roofs"]["peak_flops"] / 1e9)
    assert len(ax.get_legend().texts) == len(smoke["kernels"])


@pytest.mark.parametrize(
    "bad",
    [{"square": ()}, {"skinny": (0,)}, {"dtypes": ("fp8",)}, {"repeats": True}],
)
def test_bad_config_is_rejected(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        rb.RooflineBenchConfig(**bad)


def test_command_stamps_a_file_that_loads(tmp_path, capsys):
    out = tmp_path / "roofline.json"
    assert cli.main(["bench", "roofline", "--smoke", "--out", str(out)]) == 0
    res = results.load("roofline", "cpu", out)
    assert res["stamp"]["backend"] == "cpu" and res == json.loads(out.read_text())
    assert "decode GEMV" in capsys.readouterr().out


def test_command_rejects_a_bad_flag():
    with pytest.raises(SystemExit) as exc:
        cli.main(["bench", "roofline", "--repeats", "0", "--no-write"])
    assert exc.value.code == 2


@pytest.mark.gpu
def test_gpu_run_is_bounded_by_its_roofline():
    cfg = rb.RooflineBenchConfig(dtypes=("bfloat16",), stream_mib=1024)
    res = rb.run_roofline_bench(cfg, device="cuda")
    peak, bw = res["roofs"]["peak_flops"], res["roofs"]["bandwidth"]
    for k in res["kernels"]:
        rate = k["flops"] / k["seconds"]
        assert rate <= min(peak, k["flops"] / k["bytes"] * bw) * NOISE, k["name"]


def test_the_stamped_file_supports_what_the_page_says():
    """roofline.rst reads docs/_data/bench/roofline-cpu.json: every point within the
    noise of its roof, the batched GEMM right of this CPU's ridge, decoding left."""
    res = results.load("roofline", "cpu")
    peak, bw = res["roofs"]["peak_flops"], res["roofs"]["bandwidth"]
    ridge = res["roofs"]["ridge"]
    by_name = {k["name"]: k for k in res["kernels"]}
    for k in res["kernels"]:
        rate, intensity = k["flops"] / k["seconds"], k["flops"] / k["bytes"]
        assert 0 < rate <= min(peak, intensity * bw) * NOISE, k["name"]
    batched = by_name["decode GEMM, batched"]
    assert batched["flops"] / batched["bytes"] > ridge
    gemv = by_name["decode GEMV"]
    assert gemv["flops"] / gemv["bytes"] < ridge
