"""``aiinfra bench attention`` runs at tiny sizes and rejects bad options."""

import json

import pytest
import torch
from aiinfra import cli
from aiinfra.models.flash import bench

TINY = ["--seq-lens", "16", "40", "--heads", "1", "--head-dim", "16", "--repeats", "1"]


def run(*argv: str) -> int:
    return cli.main(["bench", "attention", *TINY, "--device", "cpu", *argv])


def test_bench_prints_json_for_every_implementation_and_length(capsys):
    assert run("--json") == 0
    (out,) = json.loads(capsys.readouterr().out)["tables"].values()
    assert out["columns"] == ["impl", "pass", "T", "ms", "peak MiB", "TFLOP/s"]
    assert [(r[0], r[1], r[2]) for r in out["rows"]] == [
        (impl, "forward", n) for n in (16, 40) for impl in ("standard", "tiled", "sdpa")
    ]
    assert all(r[3] > 0 and r[4] > 0 for r in out["rows"])
    # Throughput is the FLOP count 4 B H N^2 d over the measured time.
    for impl, _, n, ms, _, tflops in out["rows"]:
        assert tflops == pytest.approx(4 * n * n * 16 / ms / 1e9, rel=2e-3), impl


def test_bench_times_forward_and_backward_and_stores_them(tmp_path, capsys):
    out = tmp_path / "attention.json"
    argv = ["--impl", "tiled", "--passes", "all", "--causal", "--block", "8"]
    assert run(*argv, "--out", str(out)) == 0
    text = capsys.readouterr().out
    assert "forward+backward" in text and "causal=True" in text
    doc = json.loads(out.read_text())
    assert doc["stamp"]["backend"] == "cpu" and doc["config"]["causal"] is True
    assert [(r["pass"], r["N"]) for r in doc["rows"]] == [
        ("forward", 16),
        ("forward", 40),
        ("forward+backward", 16),
        ("forward+backward", 40),
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--batch", "0"), "--batch must be >= 1, got 0"),
        (("--seq-lens", "16", "-4"), "--seq-lens must be >= 1, got (16, -4)"),
        (("--impl", "triton"), "--impl: triton needs a CUDA device"),
        (("--block", "0"), "--block must be >= 1, got 0"),
        (("--passes", "backward"), "--passes: must be some of"),
        (("--impl", "magic"), "--impl/--impls: must be some of standard, tiled"),
        (("--dtype", "int8"), "--dtype: invalid choice"),
    ],
)
def test_bad_options_exit_with_status_2_and_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        run(*argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_without_a_gpu_is_rejected(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "attention", "--device", "cuda"])
    assert "no CUDA device" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"head_dim": 24, "device": "cpu", "impls": ("tiled",)}, None),
        ({"device": "tpu"}, "device must be cpu, cuda or auto"),
        ({"device": "cpu", "passes": ()}, "passes must be some of"),
        ({"device": "cpu", "dtype": "int8"}, "dtype must be one of"),
        ({"device": "cpu", "repeats": 0}, "repeats must be >= 1"),
    ],
)
def test_config_owns_its_validation(kwargs, message):
    if message is None:
        assert bench.AttentionBenchConfig(**kwargs).heads == 2  # the CPU default
        return
    with pytest.raises(ValueError, match=message):
        bench.AttentionBenchConfig(**kwargs)
