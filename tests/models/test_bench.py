"""``aiinfra bench attention`` runs at tiny sizes and rejects bad options."""

import argparse
import json

import pytest
import torch
from aiinfra.models import bench


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return parser.parse_args(list(argv))


TINY = ("--seq-lens", "16", "40", "--heads", "1", "--head-dim", "16", "--repeats", "1")


def test_bench_prints_json_for_every_implementation_and_length(capsys):
    assert bench.run(parse(*TINY, "--json", "--device", "cpu")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["columns"] == ["impl", "N", "ms", "peak MiB", "GFLOP/s"]
    assert [(r[0], r[1]) for r in out["rows"]] == [
        (impl, n) for n in (16, 40) for impl in ("standard", "tiled", "sdpa")
    ]
    assert all(r[2] > 0 and r[3] > 0 for r in out["rows"])


def test_bench_times_forward_and_backward_as_text(capsys):
    args = parse(*TINY, "--impl", "tiled", "--backward", "--causal", "--block", "8")
    assert bench.run(args) == 0
    out = capsys.readouterr().out
    assert "tiled" in out and "forward+backward" in out and "causal=True" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--batch", "0"), "--batch must be positive"),
        (("--seq-lens", "16", "-4"), "--seq-lens must be positive"),
        (("--impl", "triton", "--device", "cpu"), "--impl triton needs a CUDA device"),
        (("--block", "0"), "--block must be positive"),
    ],
)
def test_bad_options_exit_with_status_2_and_a_message(argv, message, capsys):
    assert bench.run(parse(*argv)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_without_a_gpu_is_rejected(capsys):
    assert bench.run(parse("--device", "cuda")) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_unknown_choices_are_rejected_by_argparse():
    with pytest.raises(SystemExit):
        parse("--impl", "magic")
    with pytest.raises(SystemExit):
        parse("--dtype", "int8")
